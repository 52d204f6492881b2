package redisstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-gw/switchyard/internal/fakeclock"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

// These tests run whole routers, each on its own Redis client, the way several switchyard
// replicas share one Redis: what one replica learns must steer the others.

type replica struct {
	store  *redisstore.Store
	live   *config.Live
	router *routing.Router
}

// routerReplicas starts n routers on one prefix, seeds cfg through the first and makes every
// replica follow the shared configuration.
func routerReplicas(t *testing.T, tg target, n int, cfg *configv1.Config, clock *fakeclock.Clock) []*replica {
	t.Helper()
	v, err := config.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	stores := replicas(t, tg, n)
	if _, err := stores[0].ReplaceConfig(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	out := make([]*replica, n)
	for i, s := range stores {
		live := &config.Live{}
		if err := live.Reload(t.Context(), s, v); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); config.Follower{Logger: slog.New(slog.DiscardHandler)}.Run(ctx, live, s, v) }()
		t.Cleanup(func() { cancel(); <-done })
		out[i] = &replica{store: s, live: live, router: routing.New(live, s, routing.Options{Clock: clock, Rand: routing.SystemRand{}})}
	}
	return out
}

func rdep(id, model string, w uint32, fd string) *configv1.Deployment {
	return &configv1.Deployment{Id: id, PublicModel: model, Provider: "openai", BaseUrl: "https://api.example.com",
		ProviderModel: model, ApiKey: "sk-" + id, Weight: proto.Uint32(w), FailureDomain: fd}
}

func newClock() *fakeclock.Clock { return fakeclock.New(time.Date(2031, 3, 4, 5, 6, 0, 0, time.UTC)) }

var transient = failure.Classification{Class: failure.ClassTransient, Kind: failure.KindServerError, Status: 500}

// finishOn records an attempt's outcome through replica r.
func (r *replica) finishOn(t *testing.T, depID, requestID string, c failure.Classification, clock *fakeclock.Clock) {
	t.Helper()
	d := r.live.Load().Deployments[depID]
	req := &routing.Request{ID: requestID, Model: d.PublicModel, Start: clock.Now()}
	if _, err := r.router.FinishAttempt(t.Context(), req, d, requestID+"/"+depID, routing.Result{Classification: c, Latency: time.Second}); err != nil {
		t.Fatal(err)
	}
}

func TestRoutersShareOneHalfOpenProbe(t *testing.T) {
	onEveryTopology(t, testRoutersShareOneHalfOpenProbe)
}

func testRoutersShareOneHalfOpenProbe(t *testing.T, tg target) {
	clock := newClock()
	cfg := &configv1.Config{RouterSettings: &configv1.RouterSettings{AllowedFails: proto.Uint32(0)},
		Deployments: []*configv1.Deployment{rdep("sick", "m", 1000, ""), rdep("spare", "m", 1, "")}}
	rs := routerReplicas(t, tg, 2, cfg, clock)
	rs[0].finishOn(t, "sick", "opener", transient, clock)
	clock.Advance(5 * time.Second)
	var probes atomic.Int32
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := &routing.Request{ID: fmt.Sprintf("c%d", i), Model: "m", Start: clock.Now()}
			d := rs[i%2].router.Decide(context.Background(), req, nil)
			if d.Action != routing.ActionAttempt || d.Degraded {
				t.Errorf("caller %d: %+v", i, d)
				return
			}
			if d.Deployment.ID == "sick" {
				probes.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := probes.Load(); n != 1 {
		t.Fatalf("%d of 64 callers on 2 replicas went to the half-open deployment, want exactly 1", n)
	}
}

func TestRoutersOpenTheCircuitOnce(t *testing.T) { onEveryTopology(t, testRoutersOpenTheCircuitOnce) }

func testRoutersOpenTheCircuitOnce(t *testing.T, tg target) {
	clock := newClock()
	cfg := &configv1.Config{Deployments: []*configv1.Deployment{rdep("d", "m", 1, ""), rdep("e", "m", 1, "")}}
	rs := routerReplicas(t, tg, 2, cfg, clock)
	var opened atomic.Int32
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rs[i%2]
			d := r.live.Load().Deployments["d"]
			req := &routing.Request{ID: fmt.Sprintf("r%d", i), Model: "m", Start: clock.Now()}
			tr, err := r.router.FinishAttempt(context.Background(), req, d, req.ID, routing.Result{Classification: transient})
			if err != nil {
				t.Error(err)
				return
			}
			if tr.Opened {
				opened.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := opened.Load(); n != 1 {
		t.Fatalf("%d open transitions from 64 concurrent failures on 2 replicas, want 1", n)
	}
	// Both replicas now route around it.
	for _, r := range rs {
		for i := range 20 {
			d := r.router.Decide(t.Context(), &routing.Request{ID: fmt.Sprint("after", i), Model: "m", Start: clock.Now()}, nil)
			if d.Deployment == nil || d.Deployment.ID != "e" {
				t.Fatalf("a replica still routes to the open circuit: %+v", d)
			}
		}
	}
}

func TestRoutersLateFailureCannotExtendTheCooldown(t *testing.T) {
	onEveryTopology(t, testRoutersLateFailureCannotExtendTheCooldown)
}

func testRoutersLateFailureCannotExtendTheCooldown(t *testing.T, tg target) {
	clock := newClock()
	cfg := &configv1.Config{RouterSettings: &configv1.RouterSettings{AllowedFails: proto.Uint32(0)},
		Deployments: []*configv1.Deployment{rdep("d", "m", 1, ""), rdep("e", "m", 1, "")}}
	rs := routerReplicas(t, tg, 2, cfg, clock)
	rs[0].finishOn(t, "d", "first", transient, clock)
	status := func() int64 {
		st, _, err := rs[1].router.Status(t.Context(), "m")
		if err != nil {
			t.Fatal(err)
		}
		return st[0].RetryAfterMs
	}
	before := status()
	clock.Advance(3 * time.Second)
	rs[1].finishOn(t, "d", "late", transient, clock) // started before the circuit opened
	if got := status(); got != before-3000 {
		t.Fatalf("retry_after_ms %d after a late failure 3 s later, want %d (unchanged reopen time)", got, before-3000)
	}
}

func TestRoutersThrottleCoolsTheDomainForOthers(t *testing.T) {
	onEveryTopology(t, testRoutersThrottleCoolsTheDomainForOthers)
}

func testRoutersThrottleCoolsTheDomainForOthers(t *testing.T, tg target) {
	clock := newClock()
	cfg := &configv1.Config{Deployments: []*configv1.Deployment{rdep("a1", "m", 100, "acct"), rdep("a2", "m", 100, "acct"), rdep("other", "m", 1, "")}}
	rs := routerReplicas(t, tg, 2, cfg, clock)
	rs[0].finishOn(t, "a1", "r", failure.Classification{Class: failure.ClassThrottle, Kind: failure.KindRateLimit, Status: 429, RetryAfter: 10 * time.Second}, clock)
	for i := range 50 {
		d := rs[1].router.Decide(t.Context(), &routing.Request{ID: fmt.Sprint("q", i), Model: "m", Start: clock.Now()}, nil)
		if d.Deployment == nil || d.Deployment.ID != "other" {
			t.Fatalf("replica 2 routed to %v inside a throttled failure domain", d.Deployment)
		}
	}
	clock.Advance(10 * time.Second)
	seen := map[string]bool{}
	for i := range 50 {
		d := rs[1].router.Decide(t.Context(), &routing.Request{ID: fmt.Sprint("z", i), Model: "m", Start: clock.Now()}, nil)
		seen[d.Deployment.ID] = true
	}
	if !seen["a1"] && !seen["a2"] {
		t.Fatal("the failure domain did not come back after its Retry-After")
	}
}

func TestRoutersSeeConfigurationChanges(t *testing.T) {
	onEveryTopology(t, testRoutersSeeConfigurationChanges)
}

func testRoutersSeeConfigurationChanges(t *testing.T, tg target) {
	clock := newClock()
	cfg := &configv1.Config{Deployments: []*configv1.Deployment{rdep("d", "m", 1, "")}}
	rs := routerReplicas(t, tg, 2, cfg, clock)
	if _, err := rs[0].store.ReplaceConfig(t.Context(), &configv1.Config{Deployments: []*configv1.Deployment{rdep("d", "m", 1, ""), rdep("new", "m2", 1, "")}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := rs[1].router.Decide(t.Context(), &routing.Request{ID: "x", Model: "m2", Start: clock.Now()}, nil)
		if d.Action == routing.ActionAttempt && d.Deployment.ID == "new" {
			if d.Deployment.APIKey != "sk-new" {
				t.Fatal("the other replica did not get the new deployment's key")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica 2 does not route to a deployment added on replica 1 after 10 s: %+v", d.Stop)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition another replica makes true
	}
}
