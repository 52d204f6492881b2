package routing_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store"
)

func disabled(d *configv1.Deployment) { d.Enabled = proto.Bool(false) }

func rpmLimit(n uint64) func(*configv1.Deployment) {
	return func(d *configv1.Deployment) { d.RpmLimit = proto.Uint64(n) }
}

func tpmLimit(n uint64) func(*configv1.Deployment) {
	return func(d *configv1.Deployment) { d.TpmLimit = proto.Uint64(n) }
}

func allowedFails(n uint32) func(*configv1.RouterSettings) {
	return func(rs *configv1.RouterSettings) { rs.AllowedFails = proto.Uint32(n) }
}

func TestKillSwitch(t *testing.T) {
	e := newEnv(t, cfgOf(settings(), dep("on", "m"), dep("off", "m", disabled, weight(100))))
	if got := e.counts("m", 500); got["off"] != 0 {
		t.Fatalf("disabled deployment chosen %d times", got["off"])
	}
	all := newEnv(t, cfgOf(settings(), dep("off", "m", disabled)))
	if st := all.mustStop(all.request("m"), nil); st.Status != http.StatusServiceUnavailable || st.Code != "model_unavailable" {
		t.Fatalf("all switched off: %+v, want 503 model_unavailable", st)
	}
}

func TestLimitsSkipThenReject(t *testing.T) {
	e := newEnv(t, cfgOf(settings(), dep("a", "m", rpmLimit(2)), dep("b", "m", tpmLimit(100))))
	e.busy("a", 2) // at rpmLimit
	for range 20 {
		if d := e.mustAttempt(e.request("m"), nil); d.Deployment.ID != "b" {
			t.Fatalf("chose %s at its rpm limit", d.Deployment.ID)
		}
	}
	if st := e.state("a"); st.Circuit.State(e.clock.Now()) != 0 {
		t.Fatal("a deployment over its limit was cooled down; it must only be skipped")
	}
	e.complete("b", time.Second, 10, 100) // at tpmLimit
	e.clock.Advance(15 * time.Second)
	st := e.mustStop(e.request("m"), nil)
	if st.Status != http.StatusTooManyRequests || st.Code != "rate_limit_exceeded" {
		t.Fatalf("every deployment over its limits: %+v, want 429 rate_limit_exceeded", st)
	}
	// The counters reset at the next minute: Retry-After is exactly the rest of this minute.
	now := e.clock.Now()
	next := time.Unix((now.Unix()/60+1)*60, 0)
	if st.RetryAfter != next.Sub(now) {
		t.Fatalf("Retry-After = %v, want %v (until the next minute)", st.RetryAfter, next.Sub(now))
	}
	e.clock.Advance(next.Sub(now))
	e.mustAttempt(e.request("m"), nil)
}

func TestOpenCircuitIsSkippedAndAllOpenIs503WithExactRetryAfter(t *testing.T) {
	e := newEnv(t, cfgOf(settings(allowedFails(0)), dep("a", "m"), dep("b", "m")))
	e.failOnce("a")
	for range 20 {
		if d := e.mustAttempt(e.request("m"), nil); d.Deployment.ID != "b" {
			t.Fatalf("chose %s with an open circuit", d.Deployment.ID)
		}
	}
	e.clock.Advance(2 * time.Second)
	e.failOnce("b") // b opens 2 s after a
	e.clock.Advance(1500 * time.Millisecond)
	st := e.mustStop(e.request("m"), nil)
	if st.Status != http.StatusServiceUnavailable || st.Code != "model_overloaded" {
		t.Fatalf("all open: %+v, want 503 model_overloaded", st)
	}
	// a opened 3.5 s ago with the default 5 s cooldown: back in exactly 1.5 s.
	if st.RetryAfter != 1500*time.Millisecond {
		t.Fatalf("Retry-After = %v, want exactly 1.5s", st.RetryAfter)
	}
}

func TestAllMisconfiguredIs503ModelUnavailable(t *testing.T) {
	e := newEnv(t, cfgOf(settings(), dep("a", "m"), dep("b", "m")))
	for _, id := range []string{"a", "b"} {
		d := e.live.Load().Deployments[id]
		req := e.request("m")
		if _, err := e.router.FinishAttempt(context.Background(), req, d, req.ID, routing.Result{Classification: badKey}); err != nil {
			t.Fatal(err)
		}
	}
	st := e.mustStop(e.request("m"), nil)
	if st.Status != http.StatusServiceUnavailable || st.Code != "model_unavailable" || st.RetryAfter != 0 {
		t.Fatalf("all quarantined: %+v, want 503 model_unavailable without Retry-After", st)
	}
}

func TestFailureDomainThrottle(t *testing.T) {
	e := newEnv(t, cfgOf(settings(), dep("a1", "m", domain("acct")), dep("a2", "m", domain("acct")), dep("solo", "m")))
	d := e.live.Load().Deployments["a1"]
	req := e.request("m")
	th := throttled
	th.RetryAfter = 7 * time.Second
	if _, err := e.router.FinishAttempt(context.Background(), req, d, req.ID, routing.Result{Classification: th}); err != nil {
		t.Fatal(err)
	}
	if got := e.counts("m", 200); got["a1"]+got["a2"] != 0 {
		t.Fatalf("a 429 on a1 left its failure domain usable: %v", got)
	}
	// No health penalty, no failure count (behaviour §5.7).
	if st := e.state("a1"); st.Metrics.Failures != 0 || st.Circuit.Failures != 0 {
		t.Fatalf("throttle penalised a1: %+v", st)
	}
	// Only capacity blocks: 429 with the provider's Retry-After.
	e2 := newEnv(t, cfgOf(settings(), dep("a1", "m", domain("acct")), dep("a2", "m", domain("acct"))))
	d = e2.live.Load().Deployments["a2"]
	if _, err := e2.router.FinishAttempt(context.Background(), e2.request("m"), d, "x", routing.Result{Classification: th}); err != nil {
		t.Fatal(err)
	}
	st := e2.mustStop(e2.request("m"), nil)
	if st.Status != http.StatusTooManyRequests || st.Code != "rate_limit_exceeded" || st.RetryAfter != 7*time.Second {
		t.Fatalf("shared capacity exhausted: %+v, want 429 rate_limit_exceeded with Retry-After 7s", st)
	}
}

func TestWhenAllOpenTry(t *testing.T) {
	for _, mode := range []string{"reject", "try"} {
		cfg := cfgOf(settings(allowedFails(0), func(rs *configv1.RouterSettings) { rs.WhenAllOpen = proto.String(mode) }), dep("a", "m"), dep("b", "m", rpmLimit(1)))
		e := newEnv(t, cfg)
		e.failOnce("a")
		e.busy("b", 1) // over its hard limit: never tried, even with "try"
		d := e.decide(e.request("m"), nil)
		switch mode {
		case "reject":
			if d.Action != routing.ActionStop || d.Stop.Code != "model_overloaded" {
				t.Fatalf("whenAllOpen=reject: %+v, want 503 model_overloaded", d)
			}
		case "try":
			if d.Action != routing.ActionAttempt || d.Deployment.ID != "a" {
				t.Fatalf("whenAllOpen=try: %+v, want an attempt on the cooling deployment a", d)
			}
		}
	}
}

// brokenStore fails every read, like an unreachable shared store without the resilient
// wrapper in front.
type brokenStore struct{ routing.Store }

func (brokenStore) ReadStates(context.Context, time.Time, []store.DeploymentRef, []store.DeploymentState) error {
	return errors.New("connection refused")
}

func TestStoreFailureNeverFailsRouting(t *testing.T) {
	e := newEnv(t, cfgOf(settings(allowedFails(0)), dep("a", "m"), dep("b", "m")))
	e.failOnce("a") // a's circuit is open, but the router cannot see it
	r := routing.New(e.live, brokenStore{e.store}, routing.Options{Clock: e.clock, Rand: newRand(2)})
	d := r.Decide(context.Background(), e.request("m"), nil)
	if d.Action != routing.ActionAttempt || !d.Degraded {
		t.Fatalf("decision with the store down: %+v, want an attempt flagged Degraded", d)
	}
}

func TestHalfOpenProbeOwnership(t *testing.T) {
	e := newEnv(t, cfgOf(settings(allowedFails(0)), dep("sick", "m", weight(1000)), dep("spare", "m", weight(1))))
	e.failOnce("sick")
	e.clock.Advance(5 * time.Second) // cooldown over: half-open
	var (
		mu     sync.Mutex
		probes []string
		wg     sync.WaitGroup
	)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := &routing.Request{ID: fmt.Sprintf("c%d", i), Model: "m", Start: e.clock.Now()}
			d := e.router.Decide(context.Background(), req, nil)
			if d.Action != routing.ActionAttempt {
				t.Errorf("caller %d stopped: %+v", i, d.Stop)
				return
			}
			if d.Deployment.ID == "sick" {
				mu.Lock()
				probes = append(probes, req.ID)
				mu.Unlock()
				if !d.Probe {
					t.Errorf("half-open deployment chosen without owning the probe")
				}
			}
		}()
	}
	wg.Wait()
	if len(probes) != 1 {
		t.Fatalf("%d of 64 concurrent requests went to the half-open deployment, want exactly 1 (the probe)", len(probes))
	}
}

func TestProbeSuccessClosesFailureReopens(t *testing.T) {
	e := newEnv(t, cfgOf(settings(allowedFails(0)), dep("a", "m")))
	e.failOnce("a")
	e.clock.Advance(5 * time.Second)
	req := e.request("m")
	h := &routing.History{}
	d := e.mustAttempt(req, h)
	if !d.Probe {
		t.Fatal("attempt at half-open is not the probe")
	}
	e.run(req, h, d, serverErr)
	st := e.state("a")
	if !st.Circuit.Open || st.Circuit.Reopens != 1 || st.Circuit.OpenUntil.Sub(e.clock.Now()) < 10*time.Second {
		t.Fatalf("failed probe: %+v, want reopened with a doubled cooldown", st.Circuit)
	}
	e.clock.Advance(st.Circuit.OpenUntil.Sub(e.clock.Now()))
	req = e.request("m")
	h = &routing.History{}
	d = e.mustAttempt(req, h)
	e.run(req, h, d, ok)
	if st := e.state("a"); st.Circuit.Open {
		t.Fatalf("successful probe left the circuit open: %+v", st.Circuit)
	}
}

func TestSpeaks(t *testing.T) {
	for _, tc := range []struct {
		p    failure.Provider
		api  routing.API
		want bool
	}{
		{failure.ProviderOpenAI, routing.APIOpenAI, true},
		{failure.ProviderAzureOpenAI, routing.APIOpenAI, true},
		{failure.ProviderOpenAICompatible, routing.APIOpenAI, true},
		{failure.ProviderAnthropic, routing.APIOpenAI, false},
		{failure.ProviderAnthropic, routing.APIAnthropic, true},
		{failure.ProviderOpenAI, routing.APIAnthropic, false},
		{"bedrock", routing.APIOpenAI, false},
		{failure.ProviderAnthropic, routing.APIAny, true},
	} {
		if got := routing.Speaks(tc.p, tc.api); got != tc.want {
			t.Errorf("Speaks(%s, %d) = %v", tc.p, tc.api, got)
		}
	}
}
