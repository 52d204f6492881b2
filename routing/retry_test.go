package routing_test

import (
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

// textJSON sets the text/json policy (keeping the rest of the matrix at its defaults).
func textJSON(responseMs, totalMs uint64, attempts uint32) func(*configv1.RouterSettings) {
	return func(rs *configv1.RouterSettings) {
		rs.ExecutionPolicies = config.DefaultExecutionPolicies()
		rs.ExecutionPolicies["text"].Json = &configv1.ExecutionPolicy{ResponseMs: proto.Uint64(responseMs), TotalMs: proto.Uint64(totalMs), MaxAttempts: proto.Uint32(attempts)}
	}
}

func TestFirstPassBeforeReuse(t *testing.T) {
	e := newEnv(t, cfgOf(settings(textJSON(600_000, 1_800_000, 10)), dep("a", "m"), dep("b", "m"), dep("c", "m")))
	req, h := e.request("m"), &routing.History{}
	seen := map[string]bool{}
	for i := range 3 {
		d := e.mustAttempt(req, h)
		if seen[d.Deployment.ID] {
			t.Fatalf("attempt %d reused %s before every deployment was tried", i+1, d.Deployment.ID)
		}
		if d.Wait != 0 {
			t.Fatalf("attempt %d on an untried deployment waits %v, want 0", i+1, d.Wait)
		}
		if want := map[bool]routing.Move{true: routing.MoveFirst, false: routing.MoveFailover}[i == 0]; d.Move != want {
			t.Fatalf("attempt %d move = %v, want %v", i+1, d.Move, want)
		}
		seen[d.Deployment.ID] = true
		e.run(req, h, d, serverErr)
	}
	d := e.mustAttempt(req, h)
	if d.Move != routing.MoveRetry || d.Wait < 500*time.Millisecond {
		t.Fatalf("4th attempt: move %v wait %v, want a retry after ≥0.5s", d.Move, d.Wait)
	}
}

func TestReuseBackoffDoublesToEightSecondsWithJitter(t *testing.T) {
	for _, jitter := range []float64{0, 0.999} {
		e := newEnv(t, cfgOf(settings(textJSON(600_000, 3_600_000, 20)), dep("only", "m")), withRand(fixedRand(jitter)))
		req, h := e.request("m"), &routing.History{}
		want := []time.Duration{0, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second}
		for i, base := range want {
			d := e.mustAttempt(req, h)
			lo, hi := base, base+time.Duration(float64(base)*0.25)
			if d.Wait < lo || d.Wait > hi {
				t.Fatalf("jitter %v attempt %d: wait %v, want in [%v, %v]", jitter, i+1, d.Wait, lo, hi)
			}
			if jitter == 0 && d.Wait != lo || jitter > 0.9 && base > 0 && d.Wait <= lo {
				t.Fatalf("jitter %v attempt %d: wait %v does not reflect the draw", jitter, i+1, d.Wait)
			}
			e.clock.Advance(d.Wait)
			e.run(req, h, d, serverErr)
		}
	}
}

func TestReuseWaitFloors(t *testing.T) {
	t.Run("retryAfterSeconds", func(t *testing.T) {
		e := newEnv(t, cfgOf(settings(func(rs *configv1.RouterSettings) { rs.RetryAfterSeconds = proto.Uint32(3) }, allowedFails(100)), dep("only", "m")), withRand(fixedRand(0)))
		req, h := e.request("m"), &routing.History{}
		e.run(req, h, e.mustAttempt(req, h), serverErr)
		if d := e.mustAttempt(req, h); d.Wait != 3*time.Second {
			t.Fatalf("wait = %v, want the 3s retryAfterSeconds floor", d.Wait)
		}
	})
	t.Run("provider Retry-After, honoured up to 60s", func(t *testing.T) {
		for _, tc := range []struct{ ra, want time.Duration }{{20 * time.Second, 20 * time.Second}, {500 * time.Second, 60 * time.Second}} {
			e := newEnv(t, cfgOf(settings(allowedFails(100)), dep("only", "m")), withRand(fixedRand(0)))
			req, h := e.request("m"), &routing.History{}
			fail := serverErr
			fail.Status = http.StatusServiceUnavailable
			fail.RetryAfter = tc.ra
			e.run(req, h, e.mustAttempt(req, h), fail)
			if d := e.mustAttempt(req, h); d.Wait != tc.want {
				t.Fatalf("Retry-After %v: wait %v, want %v", tc.ra, d.Wait, tc.want)
			}
		}
	})
}

func TestAttemptBudget(t *testing.T) {
	e := newEnv(t, cfgOf(settings(textJSON(600_000, 1_800_000, 2), allowedFails(100)), dep("a", "m"), dep("b", "m"), dep("c", "m")))
	req, h := e.request("m"), &routing.History{}
	e.run(req, h, e.mustAttempt(req, h), serverErr)
	last := serverErr
	last.Status, last.Message = http.StatusBadGateway, "Bad gateway from provider."
	e.run(req, h, e.mustAttempt(req, h), last)
	st := e.mustStop(req, h)
	// SPEC §7.4: the caller gets what the provider said last.
	if st.Status != http.StatusBadGateway || st.Message != "Bad gateway from provider." || !st.Upstream {
		t.Fatalf("after maxAttempts: %+v, want the last upstream 502 and its message", st)
	}
}

func TestDeadline(t *testing.T) {
	// totalMs 10 s: after 9.5 s there is no room for a meaningful attempt.
	e := newEnv(t, cfgOf(settings(textJSON(4_000, 10_000, 5), allowedFails(100)), dep("a", "m"), dep("b", "m")), withRand(fixedRand(0)))
	req, h := e.request("m"), &routing.History{}
	d := e.mustAttempt(req, h)
	if d.ResponseTimeout != 4*time.Second || !d.Deadline.Equal(req.Start.Add(10*time.Second)) {
		t.Fatalf("first attempt timeout %v deadline %v", d.ResponseTimeout, d.Deadline)
	}
	e.clock.Advance(7 * time.Second)
	e.run(req, h, d, failure.Classification{Class: failure.ClassTransient, Kind: failure.KindTimeout, Status: 504})
	d = e.mustAttempt(req, h)
	if d.ResponseTimeout != 3*time.Second {
		t.Fatalf("attempt with 3s left: timeout %v, want cut to 3s", d.ResponseTimeout)
	}
	e.clock.Advance(2500 * time.Millisecond)
	e.run(req, h, d, serverErr)
	// 0.5 s left: stop, with the last upstream answer.
	st := e.mustStop(req, h)
	if st.Status != http.StatusInternalServerError || !st.Upstream {
		t.Fatalf("stop at deadline: %+v", st)
	}
	// A reuse wait that does not fit stops too.
	e2 := newEnv(t, cfgOf(settings(textJSON(4_000, 10_000, 5), allowedFails(100)), dep("only", "m")), withRand(fixedRand(0)))
	req, h = e2.request("m"), &routing.History{}
	fail := serverErr
	fail.RetryAfter = 9 * time.Second
	e2.clock.Advance(time.Second)
	e2.run(req, h, e2.mustAttempt(req, h), fail)
	if st := e2.mustStop(req, h); st.Status != http.StatusInternalServerError {
		t.Fatalf("a 9s wait with 9s left must stop: %+v", st)
	}
}

func TestDeploymentOverridesOnlyLower(t *testing.T) {
	override := func(d *configv1.Deployment) {
		d.ExecutionPolicyOverrides = map[string]*configv1.OperationPolicy{
			"text": {Json: &configv1.ExecutionPolicy{ResponseMs: proto.Uint64(30_000), MaxAttempts: proto.Uint32(1)}},
		}
	}
	e := newEnv(t, cfgOf(settings(strategy("least-busy"), allowedFails(100)), dep("strict", "m", override), dep("other", "m")))
	e.busy("other", 1) // least-busy starts on strict
	req, h := e.request("m"), &routing.History{}
	d := e.mustAttempt(req, h)
	if d.Deployment.ID != "strict" || d.ResponseTimeout != 30*time.Second {
		t.Fatalf("first: %s timeout %v, want strict with its 30s override", d.Deployment.ID, d.ResponseTimeout)
	}
	e.run(req, h, d, serverErr)
	d = e.mustAttempt(req, h)
	e.run(req, h, d, serverErr)
	// strict allows one attempt per request: the third goes to other again, never strict.
	if d := e.mustAttempt(req, h); d.Deployment.ID != "other" {
		t.Fatalf("third attempt on %s; strict's maxAttempts override is 1", d.Deployment.ID)
	}
}

func TestRequestFaultStopsAtOnce(t *testing.T) {
	e := newEnv(t, cfgOf(settings(), dep("a", "m"), dep("b", "m")))
	req, h := e.request("m"), &routing.History{}
	e.run(req, h, e.mustAttempt(req, h), badRequest)
	st := e.mustStop(req, h)
	if st.Status != http.StatusBadRequest || st.Code != "decimal_above_max_value" || st.Message != badRequest.Message {
		t.Fatalf("request fault: %+v, want the provider's 400", st)
	}
	// It never lowers health.
	if m := e.state(h.Attempts[0].Deployment).Metrics; m.Failures != 0 || m.Successes != 0 {
		t.Fatalf("request fault recorded health: %+v", m)
	}
}

func TestConfigurationFailureFailsOverThenIs503(t *testing.T) {
	e := newEnv(t, cfgOf(settings(), dep("a", "m"), dep("b", "m")))
	req, h := e.request("m"), &routing.History{}
	e.run(req, h, e.mustAttempt(req, h), badKey)
	d := e.mustAttempt(req, h)
	if d.Deployment.ID == h.Attempts[0].Deployment || d.Wait != 0 {
		t.Fatalf("after a 401 the next attempt is %s after %v, want the other deployment at once", d.Deployment.ID, d.Wait)
	}
	e.run(req, h, d, badKey)
	st := e.mustStop(req, h)
	if st.Status != http.StatusServiceUnavailable || st.Code != "model_unavailable" || st.Upstream {
		t.Fatalf("every deployment misconfigured: %+v, want 503 model_unavailable and no provider 401", st)
	}
}

func TestCancelStops(t *testing.T) {
	e := newEnv(t, cfgOf(settings(), dep("a", "m"), dep("b", "m")))
	req, h := e.request("m"), &routing.History{}
	d := e.mustAttempt(req, h)
	e.run(req, h, d, failure.Classification{Class: failure.ClassGateway, Kind: failure.KindUnknown, Status: 499})
	if st := e.mustStop(req, h); st.Status != 499 {
		t.Fatalf("after a cancel: %+v, want a stop", st)
	}
	if m := e.state(d.Deployment.ID); m.Metrics.Failures != 0 || m.Circuit.Failures != 0 || m.Metrics.InFlight != 0 {
		t.Fatalf("a cancel penalised the deployment or leaked in-flight: %+v", m)
	}
}

func TestIncompatibilityMovesOnWithoutPenalty(t *testing.T) {
	e := newEnv(t, cfgOf(settings(allowedFails(0)), dep("a", "m"), dep("b", "m")))
	req, h := e.request("m"), &routing.History{}
	d := e.mustAttempt(req, h)
	e.run(req, h, d, failure.Classification{Class: failure.ClassIncompatible, Kind: failure.KindInvalidRequest})
	next := e.mustAttempt(req, h)
	if next.Deployment.ID == d.Deployment.ID {
		t.Fatal("an incompatible candidate was asked again")
	}
	if st := e.state(d.Deployment.ID); st.Circuit.Open || st.Metrics.Failures != 0 {
		t.Fatalf("incompatibility penalised the deployment: %+v", st)
	}
}
