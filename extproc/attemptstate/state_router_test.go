package attemptstate

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/internal/fakeclock"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
)

// A request carried across passes only by its sealed state: each pass opens the state, asks
// the real router with the history it holds, records the attempt's failure and seals again,
// the way the route and attempt roles will. The router must see every earlier attempt: fail
// over first, then fall back, then stop with the last upstream answer.
func TestStateCarriesRequestAcrossPasses(t *testing.T) {
	clock := fakeclock.New(t0)
	dep := func(id, model string) *configv1.Deployment {
		return &configv1.Deployment{Id: id, PublicModel: model, Provider: "openai", BaseUrl: "https://api.example.com",
			ProviderModel: model + "-upstream", Weight: proto.Uint32(1)}
	}
	cfg := &configv1.Config{
		RouterSettings: &configv1.RouterSettings{},
		Deployments:    []*configv1.Deployment{dep("a", "gpt-4o"), dep("b", "gpt-4o"), dep("c", "backup")},
		FallbackChains: []*configv1.FallbackChain{{PublicModel: "gpt-4o", Reason: "general", Targets: []string{"backup"}}},
	}
	v, err := config.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Config(cfg); err != nil {
		t.Fatal(err)
	}
	snap, err := config.Compile(1, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	router := routing.New(config.NewLive(snap), memstore.New(), routing.Options{Clock: clock, Rand: zeroRand{}})
	sealer := newTestSealer(t, Keys{Current: testKey(1)}, clock)
	ctx := context.Background()

	req := routing.Request{ID: "req-7", Model: "gpt-4o", Operation: config.OpText, Start: clock.Now()}
	var sealed string
	var moves []routing.Move
	var served []string
	for pass := 1; ; pass++ {
		if pass > 5 {
			t.Fatal("no stop after 5 passes")
		}
		// Route role: a new request, or the state from the redirect.
		var st *State
		var h *routing.History
		r := req
		if sealed == "" {
			h = &routing.History{}
		} else {
			if st, err = sealer.Open(sealed, req.ID); err != nil {
				t.Fatalf("pass %d: %v", pass, err)
			}
			st.Redirect()
			if r, err = st.Request(); err != nil {
				t.Fatal(err)
			}
			if h, err = st.History(); err != nil {
				t.Fatal(err)
			}
		}
		d := router.Decide(ctx, &r, h)
		if d.Action == routing.ActionStop {
			if d.Stop.Status != http.StatusServiceUnavailable || !d.Stop.Upstream || len(h.Attempts) != 3 {
				t.Fatalf("pass %d: stop %+v after %d attempts; want the last upstream 503 after 3", pass, d.Stop, len(h.Attempts))
			}
			break
		}
		if st == nil {
			st = New(&r, dialect.Chat, d.Deadline)
		}
		st.Begin(&d, fmt.Sprintf("%s-%d", r.ID, pass), clock.Now())
		moves = append(moves, d.Move)
		served = append(served, d.Deployment.ID)
		if sealed, err = sealer.Seal(st); err != nil {
			t.Fatal(err)
		}

		// Attempt role: the same state from dynamic metadata; the provider answers 503.
		st, err = sealer.Open(sealed, req.ID)
		if err != nil {
			t.Fatal(err)
		}
		cur, ok := st.Current()
		if !ok {
			t.Fatal("no attempt under way")
		}
		dep := snap.Deployments[cur.Deployment]
		if err := router.StartAttempt(ctx, dep, cur.ID, st.Deadline(), cur.Reserved); err != nil {
			t.Fatal(err)
		}
		clock.Advance(200 * time.Millisecond)
		c := failure.Classification{Class: failure.ClassTransient, Kind: failure.KindServerError, Status: 503, Message: "upstream down"}
		if _, err := router.FinishAttempt(ctx, &r, dep, cur.ID, routing.Result{Classification: c, Latency: 200 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Finish(c, 200*time.Millisecond, "prov-"+cur.ID); err != nil {
			t.Fatal(err)
		}
		if sealed, err = sealer.Seal(st); err != nil {
			t.Fatal(err)
		}
	}
	if want := []routing.Move{routing.MoveFirst, routing.MoveFailover, routing.MoveFallback}; fmt.Sprint(moves) != fmt.Sprint(want) {
		t.Errorf("moves %v, want %v", moves, want)
	}
	if served[2] != "c" || served[0] == served[1] {
		t.Errorf("deployments %v: want a and b in some order, then c", served)
	}
	st, err := sealer.Open(sealed, req.ID)
	if err != nil {
		t.Fatal(err)
	}
	h, err := st.History()
	if err != nil {
		t.Fatal(err)
	}
	// The record keeps how each attempt was chosen and what became of it.
	if st.Redirects() != 2 || len(h.Attempts) != 3 || h.Attempts[2].FallbackHop != 1 || h.Attempts[0].FallbackHop != 0 ||
		h.Attempts[2].Move != routing.MoveFallback || h.Attempts[1].Move != routing.MoveFailover ||
		h.Attempts[1].Latency != 200*time.Millisecond || h.Attempts[2].Model != "backup" ||
		h.Attempts[0].Pick == routing.PickNone || h.Attempts[1].ProviderRequestID != "prov-req-7-2" {
		t.Errorf("final history %+v after %d redirects", h.Attempts, st.Redirects())
	}
}

// zeroRand makes the router's draws deterministic (no jitter).
type zeroRand struct{}

func (zeroRand) Float64() float64 { return 0 }
