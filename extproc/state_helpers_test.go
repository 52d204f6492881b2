package extproc

import (
	"bytes"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/internal/fakeclock"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, attemptstate.KeySize) }

func newTestSealer(t testing.TB, keys attemptstate.Keys, clock *fakeclock.Clock) *attemptstate.Sealer {
	t.Helper()
	s, err := attemptstate.NewSealer(keys, attemptstate.SealerOptions{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// finishAttempt records in st a finished attempt with a's deployment, model and outcome.
func finishAttempt(t testing.TB, st *attemptstate.State, a *routing.Attempt) {
	t.Helper()
	d := routing.Decision{Deployment: &config.Deployment{ID: a.Deployment, PublicModel: a.Model}, Model: a.Model}
	st.Begin(&d, st.RequestID()+"/x", t0)
	c := failure.Classification{Class: a.Class, Kind: a.Kind, Status: a.Status, Message: a.Message, RetryAfter: a.RetryAfter}
	if _, err := st.Finish(c, a.Latency, ""); err != nil {
		t.Fatal(err)
	}
}

// historyOf is st's history, or the test fails.
func historyOf(t testing.TB, st *attemptstate.State) *routing.History {
	t.Helper()
	h, err := st.History()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
