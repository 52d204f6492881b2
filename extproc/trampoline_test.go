package extproc

import (
	"net/http"
	"net/http/httptest"
	"testing"

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
	sealer := newTestSealer(t, Keys{Current: testKey(1)}, clock)
	router := routing.New(config.NewLive(nil), memstore.New(), routing.Options{Clock: clock})
	srv := NewServer(router, sealer, Options{Clock: clock})
	st := sampleState()
	sealed, err := sealer.Seal(st)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, TrampolinePath, nil)
	req.Header.Set(headerRequestID, st.RequestId)
	req.Header.Set(contract.HeaderState, sealed)
	rec := httptest.NewRecorder()
	srv.Trampoline().ServeHTTP(rec, req)
	if rec.Code != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", rec.Code)
	}
}
