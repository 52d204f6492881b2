package routing_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// busy puts n attempts in flight on a deployment.
func (e *env) busy(id string, n int) {
	e.t.Helper()
	for i := range n {
		if err := e.store.StartAttempt(context.Background(), store.AttemptStart{DeploymentID: id, AttemptID: fmt.Sprintf("%s-busy-%d", id, i), Now: e.clock.Now(), Expires: e.clock.Now().Add(time.Hour)}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// complete records a finished successful attempt with the given latency and tokens.
func (e *env) complete(id string, latency time.Duration, completion, total int64) {
	e.t.Helper()
	d := e.live.Load().Deployments[id]
	req := e.request(d.PublicModel)
	if _, err := e.router.FinishAttempt(context.Background(), req, d, req.ID, routing.Result{Classification: ok, Latency: latency, CompletionTokens: completion, TotalTokens: total}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) failOnce(id string) {
	e.t.Helper()
	d := e.live.Load().Deployments[id]
	req := e.request(d.PublicModel)
	if _, err := e.router.FinishAttempt(context.Background(), req, d, req.ID, routing.Result{Classification: serverErr}); err != nil {
		e.t.Fatal(err)
	}
}

func TestSimpleShuffleNeverDrawsWeightZero(t *testing.T) {
	e := newEnv(t, cfgOf(settings(), dep("a", "m", weight(3)), dep("b", "m", weight(1)), dep("zero", "m", weight(0))))
	const n = 100_000
	got := e.counts("m", n)
	if got["zero"] != 0 {
		t.Fatalf("weight-0 deployment drawn %d times in %d draws", got["zero"], n)
	}
	if share := float64(got["a"]) / n; math.Abs(share-0.75) > 0.01 {
		t.Fatalf("weight 3:1 gave share %.3f to a, want 0.75±0.01", share)
	}
}

func TestLeastBusyIgnoresWeight(t *testing.T) {
	e := newEnv(t, cfgOf(settings(strategy("least-busy")), dep("a", "m", weight(10)), dep("zero", "m", weight(0))))
	e.busy("a", 2)
	e.busy("zero", 1)
	for range 100 {
		if d := e.mustAttempt(e.request("m"), nil); d.Deployment.ID != "zero" {
			t.Fatalf("least-busy chose %s (2 in flight) over zero (1 in flight, weight 0)", d.Deployment.ID)
		}
	}
}

func TestTiesAreBrokenByWeightedDraw(t *testing.T) {
	e := newEnv(t, cfgOf(settings(strategy("least-busy")), dep("a", "m", weight(3)), dep("b", "m", weight(1)), dep("c", "m", weight(0)), dep("busy", "m", weight(100))))
	e.busy("busy", 1)
	got := e.counts("m", 20_000)
	if got["busy"] != 0 || got["c"] != 0 {
		t.Fatalf("busy=%d c(weight 0)=%d, want both 0", got["busy"], got["c"])
	}
	if share := float64(got["a"]) / 20_000; math.Abs(share-0.75) > 0.02 {
		t.Fatalf("tie between weights 3 and 1 gave a %.3f, want 0.75", share)
	}
}

func TestUsageBasedStrategies(t *testing.T) {
	t.Run("rpm", func(t *testing.T) {
		e := newEnv(t, cfgOf(settings(strategy("usage-based-rpm")), dep("a", "m"), dep("b", "m")))
		e.busy("a", 3) // three attempt starts this minute
		e.busy("b", 1)
		if d := e.mustAttempt(e.request("m"), nil); d.Deployment.ID != "b" {
			t.Fatalf("chose %s, want b (fewer requests this minute)", d.Deployment.ID)
		}
	})
	t.Run("tpm", func(t *testing.T) {
		e := newEnv(t, cfgOf(settings(strategy("usage-based-tpm")), dep("a", "m"), dep("b", "m")))
		e.complete("a", time.Second, 10, 100)
		e.complete("b", time.Second, 10, 900)
		if d := e.mustAttempt(e.request("m"), nil); d.Deployment.ID != "a" {
			t.Fatalf("chose %s, want a (fewer tokens this minute)", d.Deployment.ID)
		}
		// A new minute forgets the tokens: both at 0, a tie.
		e.clock.Advance(time.Minute)
		got := e.counts("m", 2000)
		if got["a"] < 800 || got["b"] < 800 {
			t.Fatalf("after the minute rolled over: %v, want an even split", got)
		}
	})
}

func TestLatencyBased(t *testing.T) {
	e := newEnv(t, cfgOf(settings(strategy("latency-based")), dep("fast", "m", weight(0)), dep("slow", "m", weight(5)), dep("new", "m", weight(1))))
	e.complete("fast", time.Second, 10, 10)
	e.complete("slow", 3*time.Second, 10, 10)
	// A deployment without a completed request ranks at the median of the known values (2 s):
	// behind fast, ahead of slow.
	for range 50 {
		if d := e.mustAttempt(e.request("m"), nil); d.Deployment.ID != "fast" {
			t.Fatalf("latency-based chose %s, want fast (lowest EWMA, weight ignored)", d.Deployment.ID)
		}
	}
}

func TestMetricStrategiesFallBackToWeightedDraw(t *testing.T) {
	// behaviour §2.2: with no usable value anywhere, the metric strategies are the weighted draw.
	for _, s := range []string{"latency-based", "throughput-based", "health-aware", "price-based"} {
		t.Run(s, func(t *testing.T) {
			e := newEnv(t, cfgOf(settings(strategy(s)), dep("a", "m", weight(3)), dep("b", "m", weight(1)), dep("z", "m", weight(0))))
			got := e.counts("m", 20_000)
			if got["z"] != 0 {
				t.Fatalf("weight 0 drawn %d times", got["z"])
			}
			if share := float64(got["a"]) / 20_000; math.Abs(share-0.75) > 0.02 {
				t.Fatalf("share of a = %.3f, want the 0.75 of the weighted draw", share)
			}
		})
	}
}

func TestThroughputBased(t *testing.T) {
	e := newEnv(t, cfgOf(settings(strategy("throughput-based")), dep("a", "m"), dep("b", "m")))
	e.complete("a", 2*time.Second, 100, 100) // 50 tok/s
	e.complete("b", time.Second, 80, 80)     // 80 tok/s
	if d := e.mustAttempt(e.request("m"), nil); d.Deployment.ID != "b" {
		t.Fatalf("chose %s, want b (highest tokens/s)", d.Deployment.ID)
	}
}

func price(in, out float64) func(*configv1.Deployment) {
	return func(d *configv1.Deployment) {
		d.Price = &configv1.Price{InputPerMillion: proto.Float64(in), OutputPerMillion: proto.Float64(out)}
	}
}

func searchPrice(cents float64) func(*configv1.Deployment) {
	return func(d *configv1.Deployment) { d.Price = &configv1.Price{SearchUnitCents: proto.Float64(cents)} }
}

func TestPriceBased(t *testing.T) {
	t.Run("token rates compare input plus output", func(t *testing.T) {
		// a: 1+10 = 11, b: 5+5 = 10 per 1M input + 1M output.
		e := newEnv(t, cfgOf(settings(strategy("price-based")), dep("a", "m", price(1, 10), weight(9)), dep("b", "m", price(5, 5))))
		for range 50 {
			if d := e.mustAttempt(e.request("m"), nil); d.Deployment.ID != "b" {
				t.Fatalf("chose %s, want b (cheaper combined rate)", d.Deployment.ID)
			}
		}
	})
	t.Run("search units compare cents", func(t *testing.T) {
		e := newEnv(t, cfgOf(settings(strategy("price-based")), dep("a", "m", searchPrice(0.5)), dep("b", "m", searchPrice(0.2))))
		if d := e.mustAttempt(e.request("m"), nil); d.Deployment.ID != "b" {
			t.Fatalf("chose %s, want b", d.Deployment.ID)
		}
	})
	t.Run("mixed bases fall back to the weighted draw", func(t *testing.T) {
		e := newEnv(t, cfgOf(settings(strategy("price-based")), dep("tokens", "m", price(100, 100), weight(3)), dep("search", "m", searchPrice(0.1))))
		got := e.counts("m", 8000)
		if share := float64(got["tokens"]) / 8000; math.Abs(share-0.75) > 0.03 {
			t.Fatalf("mixed bases: share of the numerically dearer one = %.3f, want 0.75 (weighted)", share)
		}
	})
	t.Run("unknown price falls back to the weighted draw", func(t *testing.T) {
		e := newEnv(t, cfgOf(settings(strategy("price-based")), dep("priced", "m", price(100, 100)), dep("unpriced", "m")))
		got := e.counts("m", 4000)
		if got["priced"] < 1600 || got["unpriced"] < 1600 {
			t.Fatalf("unknown price: %v, want an even weighted split", got)
		}
	})
}

func TestHealthAware(t *testing.T) {
	t.Run("highest success rate times weight", func(t *testing.T) {
		e := newEnv(t, cfgOf(settings(strategy("health-aware")), dep("good", "m"), dep("flaky", "m", weight(1)), dep("fresh", "m")))
		for range 4 {
			e.complete("good", time.Second, 1, 1)
		}
		e.complete("flaky", time.Second, 1, 1)
		e.failOnce("flaky")
		e.failOnce("flaky")
		// good 1.0, flaky 0.33, fresh neutral 0.5.
		for range 50 {
			if d := e.mustAttempt(e.request("m"), nil); d.Deployment.ID != "good" {
				t.Fatalf("chose %s, want good", d.Deployment.ID)
			}
		}
	})
	t.Run("neutral 0.5 beats a poor record", func(t *testing.T) {
		e := newEnv(t, cfgOf(settings(strategy("health-aware")), dep("flaky", "m"), dep("fresh", "m")))
		e.complete("flaky", time.Second, 1, 1)
		e.failOnce("flaky")
		e.failOnce("flaky")
		if got := e.state("fresh").Metrics.HealthScore(); got != 0.5 {
			t.Fatalf("health of a deployment with no data = %v, want 0.5", got)
		}
		if d := e.mustAttempt(e.request("m"), nil); d.Deployment.ID != "fresh" {
			t.Fatalf("chose %s (0.33), want fresh (neutral 0.5, not 1.0 and not 0)", d.Deployment.ID)
		}
	})
	t.Run("weight zero is skipped", func(t *testing.T) {
		e := newEnv(t, cfgOf(settings(strategy("health-aware")), dep("perfect0", "m", weight(0)), dep("meh", "m")))
		e.complete("perfect0", time.Second, 1, 1)
		e.complete("meh", time.Second, 1, 1)
		e.failOnce("meh")
		for range 50 {
			if d := e.mustAttempt(e.request("m"), nil); d.Deployment.ID != "meh" {
				t.Fatalf("chose %s, want meh: weight 0 scores 0", d.Deployment.ID)
			}
		}
	})
}

func TestSingleMemberGroupSkipsSelection(t *testing.T) {
	cr := &countingRand{inner: newRand(3)}
	e := newEnv(t, cfgOf(settings(strategy("health-aware")), dep("only", "solo", weight(7))), withRand(cr))
	for range 10 {
		if d := e.mustAttempt(e.request("solo"), nil); d.Deployment.ID != "only" {
			t.Fatalf("chose %s", d.Deployment.ID)
		}
	}
	if cr.calls != 0 {
		t.Fatalf("the strategy ran (%d random draws) for a group of one", cr.calls)
	}
	// Its metrics are still recorded.
	e.complete("only", 2*time.Second, 40, 50)
	if m := e.state("only").Metrics; !m.HasLatency || m.LatencyEWMA != 2 || m.TPM != 50 || m.Successes != 1 {
		t.Fatalf("metrics of a single-member group not recorded: %+v", m)
	}
}

// The throughput metric needs tokens: a success without usage leaves it unknown.
func TestThroughputNeedsTokens(t *testing.T) {
	e := newEnv(t, cfgOf(settings(), dep("a", "m")))
	d := e.live.Load().Deployments["a"]
	req := e.request("m")
	if _, err := e.router.FinishAttempt(context.Background(), req, d, "x", routing.Result{Classification: failure.Classification{}, Latency: time.Second}); err != nil {
		t.Fatal(err)
	}
	if m := e.state("a").Metrics; m.HasThroughput || !m.HasLatency {
		t.Fatalf("metrics = %+v, want latency but no throughput", m)
	}
}

// behaviour §2: weight 0 is never drawn and health-aware multiplies it away. A drained deployment
// takes no traffic from simple-shuffle or health-aware, failover included; a group of only
// drained deployments falls back, or stops like a group without an eligible candidate.
func TestDrainedDeploymentTakesNoTraffic(t *testing.T) {
	for _, s := range []string{"simple-shuffle", "health-aware"} {
		t.Run(s, func(t *testing.T) {
			e := newEnv(t, cfgOf(settings(strategy(s), allowedFails(100)), dep("a", "m"), dep("z", "m", weight(0))))
			req, h := e.request("m"), &routing.History{}
			for range 3 {
				d := e.mustAttempt(req, h)
				if d.Deployment.ID != "a" {
					t.Fatalf("attempt %d on the drained deployment (move %v)", len(h.Attempts)+1, d.Move)
				}
				e.clock.Advance(d.Wait)
				e.run(req, h, d, serverErr)
			}

			e = newEnv(t, withChains(cfgOf(settings(strategy(s)), dep("z1", "m", weight(0)), dep("z2", "m", weight(0)), dep("b", "backup")),
				chain("m", "general", "backup")))
			if d := e.mustAttempt(e.request("m"), nil); d.Deployment.ID != "b" || d.Move != routing.MoveFirst {
				t.Fatalf("only drained deployments: %s, want the fallback b", d.Deployment.ID)
			}
			e = newEnv(t, cfgOf(settings(strategy(s)), dep("z1", "m", weight(0)), dep("z2", "m", weight(0))))
			if st := e.mustStop(e.request("m"), nil); st.Status != http.StatusServiceUnavailable || st.Code != "model_unavailable" {
				t.Fatalf("only drained deployments, no fallback: %+v, want 503 model_unavailable", st)
			}
			e = newEnv(t, cfgOf(settings(strategy(s)), dep("solo", "m", weight(0))))
			if st := e.mustStop(e.request("m"), nil); st.Code != "model_unavailable" {
				t.Fatalf("a drained single-member group: %+v, want 503 model_unavailable", st)
			}
		})
	}
}

// behaviour §10.1: the decision says how its deployment was picked.
func TestDecisionSaysHowItPicked(t *testing.T) {
	cases := []struct {
		name string
		cfg  *configv1.Config
		prep func(e *env)
		want routing.Pick
	}{
		{"single-member group", cfgOf(settings(strategy("latency-based")), dep("a", "m")), nil, routing.PickSingle},
		{"strategy", cfgOf(settings(), dep("a", "m"), dep("b", "m")), nil, routing.PickStrategy},
		{"metric strategy without data", cfgOf(settings(strategy("latency-based")), dep("a", "m"), dep("b", "m")), nil, routing.PickWeighted},
		{"metric strategy with data", cfgOf(settings(strategy("latency-based")), dep("a", "m"), dep("b", "m")), func(e *env) { e.complete("a", time.Second, 1, 2) }, routing.PickStrategy},
		{"mixed price bases", cfgOf(settings(strategy("price-based")), dep("a", "m", price(1, 2)), dep("b", "m")), nil, routing.PickWeighted},
	}
	for _, tc := range cases {
		e := newEnv(t, tc.cfg)
		if tc.prep != nil {
			tc.prep(e)
		}
		if d := e.mustAttempt(e.request("m"), nil); d.Pick != tc.want || d.Probe || d.AllOpenTry {
			t.Errorf("%s: pick %v probe %v try %v, want %v", tc.name, d.Pick, d.Probe, d.AllOpenTry, tc.want)
		}
	}
	e := newEnv(t, cfgOf(settings(allowedFails(0)), dep("a", "m"), dep("b", "m")))
	e.failOnce("a")
	e.failOnce("b")
	e.clock.Advance(5 * time.Second)
	if d := e.mustAttempt(e.request("m"), nil); !d.Probe || d.Pick != routing.PickStrategy {
		t.Errorf("half-open pick: %+v, want a probe chosen by the strategy", d)
	}
	e.mustAttempt(e.request("m"), nil) // the other probe
	if d := e.decide(e.request("m"), nil); d.Action != routing.ActionStop || d.Pick != routing.PickNone {
		t.Errorf("a stop reports pick %v", d.Pick)
	}
}
