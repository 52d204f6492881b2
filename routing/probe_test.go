package routing_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
)

func whenAllOpen(mode string) func(*configv1.RouterSettings) {
	return func(rs *configv1.RouterSettings) { rs.WhenAllOpen = proto.String(mode) }
}

// behaviour §5.4: exactly one request holds a half-open probe, whenAllOpen "try" included.
func TestWhenAllOpenTryNeverTakesAnOwnedProbe(t *testing.T) {
	onEachStore(t, func(t *testing.T, newEnv func(*configv1.Config, ...func(*routing.Options)) *env) {
		e := newEnv(cfgOf(settings(allowedFails(0), whenAllOpen("try")), dep("a", "m")))
		e.failOnce("a")
		e.clock.Advance(5 * time.Second) // cooldown over: half-open
		if owner := e.mustAttempt(e.request("m"), nil); !owner.Probe || owner.AllOpenTry {
			t.Fatalf("first request after the cooldown: %+v, want the probe", owner)
		}
		e.clock.Advance(10 * time.Second) // the owner's probe has 20 s left
		st := e.mustStop(e.request("m"), nil)
		if st.Status != http.StatusServiceUnavailable || st.Code != "model_overloaded" || st.RetryAfter != 20*time.Second {
			t.Fatalf("second request while the probe is owned: %+v, want 503 model_overloaded with Retry-After 20s", st)
		}
		// A cooling circuit is still tried with "try": only probes are exclusive.
		e2 := newEnv(cfgOf(settings(allowedFails(0), whenAllOpen("try")), dep("b", "m")))
		e2.failOnce("b")
		if d := e2.mustAttempt(e2.request("m"), nil); !d.AllOpenTry || d.Probe {
			t.Fatalf("cooling circuit with whenAllOpen try: %+v, want an AllOpenTry attempt", d)
		}
	})
}

// rivalStore lets a rival request win every probe just before the router asks for it: the
// race a request loses to another replica between reading the state and acquiring the probe.
type rivalStore struct{ store.Store }

func (s rivalStore) AcquireProbe(ctx context.Context, deploymentID, requestID string, now time.Time, ttl time.Duration) (bool, error) {
	if _, err := s.Store.AcquireProbe(ctx, deploymentID, "rival", now, ttl); err != nil {
		return false, err
	}
	return s.Store.AcquireProbe(ctx, deploymentID, requestID, now, ttl)
}

// A request that loses the probe race is answered like one that comes a moment later
// (behaviour §7.5): 503 model_overloaded with the exact Retry-After of the rival's probe.
func TestLosingTheProbeRaceIsOverloadedWithRetryAfter(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			e := newEnvOn(t, rivalStore{st}, cfgOf(settings(allowedFails(0)), dep("a", "m")))
			e.failOnce("a")
			e.clock.Advance(5 * time.Second)
			stop := e.mustStop(e.request("m"), nil)
			if stop.Status != http.StatusServiceUnavailable || stop.Code != "model_overloaded" || stop.RetryAfter != 30*time.Second {
				t.Fatalf("loser of the probe race: %+v, want 503 model_overloaded with Retry-After 30s", stop)
			}
			// The same answer as a request arriving a moment later, without a race.
			r := routing.New(e.live, st, routing.Options{Clock: e.clock, Rand: newRand(5)})
			d := r.Decide(context.Background(), e.request("m"), nil)
			if d.Action != routing.ActionStop || *d.Stop != *stop {
				t.Fatalf("a moment later: %+v, want the loser's answer %+v", d.Stop, stop)
			}
		})
	}
}

// behaviour §4.3: a deployment without failureDomain is its own domain; no configured value can
// name that domain.
func TestImplicitFailureDomainCannotBeJoined(t *testing.T) {
	onEachStore(t, func(t *testing.T, newEnv func(*configv1.Config, ...func(*routing.Options)) *env) {
		e := newEnv(cfgOf(settings(), dep("c", "m"), dep("x", "other", domain("deployment:c"))))
		x := e.live.Load().Deployments["x"]
		th := throttled
		th.RetryAfter = 10 * time.Second
		if _, err := e.router.FinishAttempt(context.Background(), e.request("other"), x, "x1", routing.Result{Classification: th}); err != nil {
			t.Fatal(err)
		}
		if st := e.state("c"); st.Capacity.Limited(e.clock.Now()) {
			t.Fatalf("a 429 on failureDomain %q rate-limited deployment c: %+v", "deployment:c", st.Capacity)
		}
		if d := e.mustAttempt(e.request("m"), nil); d.Deployment.ID != "c" {
			t.Fatalf("chose %s", d.Deployment.ID)
		}
	})
	v, err := config.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Config(cfgOf(settings(), dep("x", "m", domain(store.DomainOf("c", ""))))); err == nil {
		t.Fatalf("failureDomain %q (the implicit domain of c) accepted", store.DomainOf("c", ""))
	}
}
