package attemptstate

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-gw/switchyard/internal/fakeclock"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	statev1 "github.com/switchyard-gw/switchyard/proto/switchyard/state/v1"
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
		var st *statev1.State
		var h *routing.History
		r := req
		if sealed == "" {
			h = &routing.History{}
		} else {
			if st, err = sealer.Open(sealed, req.ID); err != nil {
				t.Fatalf("pass %d: %v", pass, err)
			}
			if r, err = requestOf(st); err != nil {
				t.Fatal(err)
			}
			if h, err = historyOf(st); err != nil {
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
			st = newState(&r, statev1.Dialect_DIALECT_OPENAI_CHAT, d.Deadline)
		}
		var hop uint32
		if d.Model != r.Model {
			hop = 1
		}
		beginAttempt(st, &d, fmt.Sprintf("%s-%d", r.ID, pass), clock.Now(), hop)
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
		dep := snap.Deployments[st.GetCurrent().GetDeploymentId()]
		if err := router.StartAttempt(ctx, dep, st.GetCurrent().GetAttemptId(), d.Deadline, d.Reserved); err != nil {
			t.Fatal(err)
		}
		clock.Advance(200 * time.Millisecond)
		c := failure.Classification{Class: failure.ClassTransient, Kind: failure.KindServerError, Status: 503, Message: "upstream down"}
		if _, err := router.FinishAttempt(ctx, &r, dep, st.GetCurrent().GetAttemptId(), routing.Result{Classification: c, Latency: 200 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		a := routing.AttemptFrom(dep, c, 200*time.Millisecond)
		finishAttempt(st, &a)
		st.Redirects++
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
	if st.GetRedirects() != 3 || len(st.GetAttempts()) != 3 || st.GetAttempts()[2].GetFallbackHop() != 1 ||
		st.GetAttempts()[2].GetMove() != statev1.Move_MOVE_FALLBACK || st.GetAttempts()[1].GetLatencyNanos() != int64(200*time.Millisecond) {
		t.Errorf("final state %v", st)
	}
}

// zeroRand makes the router's draws deterministic (no jitter).
type zeroRand struct{}

func (zeroRand) Float64() float64 { return 0 }
