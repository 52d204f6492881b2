package extproc

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/internal/fakeclock"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
)

// A trampoline call on a replica that has no configuration yet (its first load failed) is a
// 502, not a panic.
func TestTrampolineWithoutConfiguration(t *testing.T) {
	clock := fakeclock.New(t0)
	sealer := newTestSealer(t, attemptstate.Keys{Current: testKey(1)}, clock)
	router := routing.New(config.NewLive(nil), memstore.New(), routing.Options{Clock: clock})
	srv := NewServer(router, sealer, Options{Clock: clock})
	st := attemptstate.New(&routing.Request{ID: "req-1", Model: "gpt-4o", Start: t0}, dialect.Chat, t0.Add(time.Hour))
	st.Begin(&routing.Decision{Deployment: &config.Deployment{ID: "a", PublicModel: "gpt-4o"}, Model: "gpt-4o"}, "req-1/1/x", t0)
	sealed, err := sealer.Seal(st)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, TrampolinePath, nil)
	req.Header.Set(headerRequestID, st.RequestID())
	req.Header.Set(contract.HeaderState, sealed)
	rec := httptest.NewRecorder()
	srv.Trampoline().ServeHTTP(rec, req)
	if rec.Code != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", rec.Code)
	}
}
