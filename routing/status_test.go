package routing_test

import (
	"context"
	"testing"
	"time"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
)

func TestStatusReportsCircuitStates(t *testing.T) {
	onEachStore(t, func(t *testing.T, newEnv func(*configv1.Config, ...func(*routing.Options)) *env) {
		e := newEnv(cfgOf(settings(allowedFails(0)), dep("cool", "m"), dep("half", "m"), dep("limited", "m", domain("acct")), dep("fine", "m", rpmLimit(5)), dep("off", "m", disabled)))
		e.failOnce("half")
		e.clock.Advance(5 * time.Second) // half: cooldown over → half_open
		e.failOnce("cool")
		e.clock.Advance(2 * time.Second) // cool: 3 s of cooldown left
		d := e.live.Load().Deployments["limited"]
		th := throttled
		th.RetryAfter = 10 * time.Second
		if _, err := e.router.FinishAttempt(context.Background(), e.request("m"), d, "x", routing.Result{Classification: th}); err != nil {
			t.Fatal(err)
		}
		got, ok, err := e.router.Status(context.Background(), "m")
		if err != nil || !ok {
			t.Fatalf("Status: %v %v", ok, err)
		}
		want := map[string]struct {
			state string
			ms    int64
		}{
			"cool":    {"cooldown", 3000},
			"half":    {"half_open", 0},
			"limited": {"rate_limited", 10000},
			"fine":    {"available", 0},
			"off":     {"disabled", 0},
		}
		if len(got) != len(want) {
			t.Fatalf("Status reported %d deployments, want %d: %+v", len(got), len(want), got)
		}
		for _, s := range got {
			w := want[s.ID]
			if s.State != w.state || s.RetryAfterMs != w.ms {
				t.Errorf("%s: %s %dms, want %s %dms", s.ID, s.State, s.RetryAfterMs, w.state, w.ms)
			}
			if s.ID == "off" && s.Enabled {
				t.Error("switched-off deployment reported enabled")
			}
		}
		e.busy("fine", 5)
		got, _, _ = e.router.Status(context.Background(), "m")
		if fine := statusOf(t, got, "fine"); fine.State != "rate_limited" || fine.Cause != "limit" {
			t.Errorf("deployment at its rpm limit reported %+v", fine)
		}
		if _, ok, _ := e.router.Status(context.Background(), "nope"); ok {
			t.Fatal("unknown model reported")
		}
	})
}

// statusOf returns the status of deployment id, failing the test when it is missing.
func statusOf(t *testing.T, got []routing.DeploymentStatus, id string) routing.DeploymentStatus {
	t.Helper()
	for _, s := range got {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("no status for %s in %+v", id, got)
	return routing.DeploymentStatus{}
}

// Deployments reports every deployment of every model, by id, with its circuit (closed,
// open, half_open, quarantined, disabled), the wait before it may be tried and its
// attempts in flight; the per-model status view carries the same circuit and count.
func TestDeploymentsReportCircuitAndInFlight(t *testing.T) {
	onEachStore(t, func(t *testing.T, newEnv func(*configv1.Config, ...func(*routing.Options)) *env) {
		e := newEnv(cfgOf(settings(allowedFails(0)), dep("open", "m"), dep("half", "m"), dep("quar", "m"), dep("fine", "m"),
			dep("off", "m", disabled), dep("other", "n")))
		e.failOnce("half")
		e.clock.Advance(5 * time.Second) // half: cooldown over
		e.failOnce("open")
		d := e.live.Load().Deployments["quar"]
		req := e.request("m")
		if _, err := e.router.FinishAttempt(context.Background(), req, d, req.ID, routing.Result{Classification: badKey}); err != nil {
			t.Fatal(err)
		}
		e.busy("fine", 3)
		e.busy("other", 1)
		got, err := e.router.Deployments(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			id, circuit string
			inFlight    int64
			waits       bool
		}{
			{"fine", "closed", 3, false}, {"half", "half_open", 0, false}, {"off", "disabled", 0, false},
			{"open", "open", 0, true}, {"other", "closed", 1, false}, {"quar", "quarantined", 0, true},
		}
		if len(got) != len(want) {
			t.Fatalf("Deployments reported %+v, want %d deployments", got, len(want))
		}
		for i, w := range want {
			g := got[i]
			if g.ID != w.id || g.Circuit != w.circuit || g.InFlight != w.inFlight || (g.RetryAfterMs > 0) != w.waits {
				t.Errorf("[%d] = %+v, want %s %s in flight %d waits %v", i, g, w.id, w.circuit, w.inFlight, w.waits)
			}
		}
		view, _, err := e.router.Status(context.Background(), "m")
		if err != nil {
			t.Fatal(err)
		}
		if s := statusOf(t, view, "fine"); s.InFlight != 3 || s.Circuit != "closed" {
			t.Errorf("status view of fine: %+v", s)
		}
		if s := statusOf(t, view, "quar"); s.Circuit != "quarantined" || s.State != "cooldown" || s.Cause != "configuration" {
			t.Errorf("status view of quar: %+v", s)
		}
	})
}
