package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/routing/store"
)

const callers = 64

// handles opens n handles (replicas) onto one shared state.
func handles(t *testing.T, replica func() store.Store, n int) []store.Store {
	hs := make([]store.Store, n)
	for i := range hs {
		hs[i] = replica()
	}
	return hs
}

// together runs fn(i) for i in [0,callers) released at the same moment.
func together(fn func(i int)) { Concurrently(callers, fn) }

// Concurrently runs fn(i) for i in [0,n) on n goroutines released at the same moment, and
// waits for all of them: the shape of every "N callers at once" test.
func Concurrently(n int, fn func(i int)) {
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			fn(i)
		}()
	}
	close(gate)
	wg.Wait()
}

func runConcurrency(t *testing.T, f Factory) {
	t.Run("HalfOpenAdmitsExactlyOneProbe", func(t *testing.T) {
		s, replica := open(t, f)
		hs := handles(t, replica, 4)
		cs := settings()
		cs.AllowedFails = 0
		fail(t, s, "d1", "opener", t0, cs)
		half := t0.Add(cs.Cooldown)
		var winners atomic.Int32
		errs := make(chan error, callers)
		together(func(i int) {
			ok, err := hs[i%len(hs)].AcquireProbe(t.Context(), "d1", fmt.Sprintf("req-%d", i), half, cs.HalfOpenProbe)
			if err != nil {
				errs <- err
				return
			}
			if ok {
				winners.Add(1)
			}
		})
		close(errs)
		for err := range errs {
			t.Fatalf("AcquireProbe: %v", err)
		}
		if n := winners.Load(); n != 1 {
			t.Fatalf("%d of %d concurrent callers own the probe, want exactly 1", n, callers)
		}
	})

	t.Run("ConcurrentFailuresOpenOnce", func(t *testing.T) {
		_, replica := open(t, f)
		hs := handles(t, replica, 4)
		cs := settings()
		var opened, counted atomic.Int32
		together(func(i int) {
			tr, err := hs[i%len(hs)].FinishAttempt(t.Context(), store.AttemptFinish{
				DeploymentID: "d1", Domain: store.DomainOf("d1", ""), AttemptID: fmt.Sprintf("a%d", i),
				RequestID: fmt.Sprintf("r%d", i), Now: t0, Effect: store.EffectTransient, Settings: cs,
			})
			if err != nil {
				t.Errorf("FinishAttempt: %v", err)
				return
			}
			if tr.Opened {
				opened.Add(1)
			}
			if tr.Counted {
				counted.Add(1)
			}
		})
		if n := opened.Load(); n != 1 {
			t.Fatalf("%d open transitions from %d concurrent failures, want exactly 1", n, callers)
		}
		// allowedFails+1 failures open it; later ones arrive at an open circuit and do not count.
		if n := counted.Load(); n != int32(cs.AllowedFails)+1 {
			t.Fatalf("%d failures counted, want %d", n, cs.AllowedFails+1)
		}
	})

	t.Run("InFlightBalancesUnderConcurrency", func(t *testing.T) {
		s, replica := open(t, f)
		hs := handles(t, replica, 4)
		together(func(i int) {
			h := hs[i%len(hs)]
			id := fmt.Sprintf("a%d", i)
			if err := h.StartAttempt(t.Context(), store.AttemptStart{DeploymentID: "d1", AttemptID: id, Now: t0, Expires: t0.Add(time.Hour)}); err != nil {
				t.Errorf("StartAttempt: %v", err)
				return
			}
			if _, err := h.FinishAttempt(t.Context(), store.AttemptFinish{DeploymentID: "d1", Domain: store.DomainOf("d1", ""), AttemptID: id, RequestID: id, Now: t0, Effect: store.EffectNeutral, Settings: settings()}); err != nil {
				t.Errorf("FinishAttempt: %v", err)
			}
		})
		st := state(t, s, "d1", "", t0)
		if st.Metrics.InFlight != 0 || st.Metrics.RPM != callers {
			t.Fatalf("after %d start/finish pairs: in-flight %d rpm %d, want 0 and %d", callers, st.Metrics.InFlight, st.Metrics.RPM, callers)
		}
	})
}
