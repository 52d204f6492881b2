package routing_test

import (
	"fmt"
	"net/http"
	"strings"
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
	// behaviour §7.4: the caller gets what the provider said last.
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

// A deployment whose own totalMs override is spent is no candidate: no decision carries a
// per-attempt timeout below MinAttemptTime (behaviour §6.3, §6.4).
func TestSpentDeploymentTotalIsNoCandidate(t *testing.T) {
	onEachStore(t, func(t *testing.T, newEnv func(*configv1.Config, ...func(*routing.Options)) *env) {
		short := func(d *configv1.Deployment) {
			d.ExecutionPolicyOverrides = map[string]*configv1.OperationPolicy{
				"text": {Json: &configv1.ExecutionPolicy{TotalMs: proto.Uint64(3_000)}},
			}
		}
		e := newEnv(cfgOf(settings(strategy("least-busy"), allowedFails(100)), dep("short", "m", short), dep("b", "m")), withRand(fixedRand(0)))
		e.busy("b", 1) // least-busy prefers short whenever it is a candidate
		req, h := e.request("m"), &routing.History{}
		d := e.mustAttempt(req, h)
		if d.Deployment.ID != "short" || d.ResponseTimeout != 3*time.Second {
			t.Fatalf("first: %s timeout %v, want short with its 3s window", d.Deployment.ID, d.ResponseTimeout)
		}
		e.clock.Advance(2500 * time.Millisecond)
		e.run(req, h, d, serverErr)
		for i := range 2 { // maxAttempts 3
			d = e.decide(req, h)
			if d.Action != routing.ActionAttempt {
				t.Fatalf("decision %d: stop %+v; history %+v", i, d.Stop, h.Attempts)
			}
			if d.Deployment.ID == "short" || d.ResponseTimeout < routing.MinAttemptTime {
				t.Fatalf("decision on %s with timeout %v, want b: short's totalMs is spent", d.Deployment.ID, d.ResponseTimeout)
			}
			e.clock.Advance(d.Wait)
			e.run(req, h, d, serverErr)
		}
	})
}

// behaviour §6.4 counts upstream attempts: incompatibilities the gateway finds itself do not spend
// maxAttempts.
func TestIncompatibilitiesSpendNoAttempt(t *testing.T) {
	onEachStore(t, func(t *testing.T, newEnv func(*configv1.Config, ...func(*routing.Options)) *env) {
		e := newEnv(cfgOf(settings(textJSON(600_000, 1_800_000, 2), allowedFails(100)), dep("a", "m"), dep("b", "m"), dep("c", "m")))
		req, h := e.request("m"), &routing.History{}
		incompatible := failure.Classification{Class: failure.ClassIncompatible, Kind: failure.KindInvalidRequest}
		e.run(req, h, e.mustAttempt(req, h), incompatible)
		e.run(req, h, e.mustAttempt(req, h), incompatible)
		d := e.mustAttempt(req, h)
		e.run(req, h, d, serverErr)
		if d := e.mustAttempt(req, h); d.Deployment.ID != h.Attempts[2].Deployment || d.Move != routing.MoveRetry {
			t.Fatalf("second upstream attempt: %s %v, want a retry of the only compatible deployment", d.Deployment.ID, d.Move)
		}
	})
}

// behaviour §7.2: the backoff doubles per upstream asked again, not per request.
func TestReuseBackoffDoublesPerUpstream(t *testing.T) {
	onEachStore(t, func(t *testing.T, newEnv func(*configv1.Config, ...func(*routing.Options)) *env) {
		// least-busy steered by in-flight entries: a, b, then a, b, b again.
		e := newEnv(cfgOf(settings(strategy("least-busy"), textJSON(600_000, 3_600_000, 10), allowedFails(100)), dep("a", "m"), dep("b", "m")), withRand(fixedRand(0)))
		req, h := e.request("m"), &routing.History{}
		var got []string
		step := func() {
			d := e.mustAttempt(req, h)
			got = append(got, fmt.Sprintf("%s+%v", d.Deployment.ID, d.Wait))
			e.clock.Advance(d.Wait)
			e.run(req, h, d, serverErr)
		}
		e.busy("b", 1)
		step()
		step()
		step() // a again: its first reuse
		e.busy("a", 2)
		step() // b again: its first reuse, whatever a's count
		step() // b's second reuse
		if want := "a+0s b+0s a+500ms b+500ms b+1s"; strings.Join(got, " ") != want {
			t.Fatalf("attempts %v, want %s", got, want)
		}
	})
}

// History.Record keeps the fallback reason and the refusing model, so a context-window chain
// that started on a fallback model survives a transient failure inside it (behaviour §7.6).
func TestRecordKeepsTheRefusalChain(t *testing.T) {
	cfg := withChains(cfgOf(settings(textJSON(600_000, 1_800_000, 5), allowedFails(100)), dep("p", "primary"), dep("f", "fallback"), dep("big1", "big"), dep("big2", "big")),
		chain("primary", "general", "fallback"), chain("fallback", "context_window", "big"))
	e := newEnv(t, cfg)
	req, h := e.request("primary"), &routing.History{}
	e.run(req, h, e.mustAttempt(req, h), serverErr) // p fails: general fallback
	e.run(req, h, e.mustAttempt(req, h), tooLong)   // f refuses: its context-window chain
	d := e.mustAttempt(req, h)
	if d.Model != "big" || d.Reason != config.ReasonContextWindow || d.ReasonFrom != "fallback" {
		t.Fatalf("after fallback's refusal: %+v, want big on fallback's context_window chain", d)
	}
	e.run(req, h, d, serverErr)
	if h.Reason != config.ReasonContextWindow || h.ReasonFrom != "fallback" || len(h.Attempts) != 3 || h.Attempts[2].Latency != time.Second {
		t.Fatalf("history after Record: %+v", h)
	}
	if d := e.mustAttempt(req, h); d.Model != "big" || d.Move != routing.MoveFailover {
		t.Fatalf("after a transient failure inside the chain: %s (%v), want the other big deployment", d.Deployment.ID, d.Move)
	}
}

// behaviour §7.4: a request whose budget is spent ends with what the last upstream said (b),
// even when an incompatibility the gateway found itself was recorded after it.
func TestSpentBudgetStopsWithTheLastUpstream(t *testing.T) {
	onEachStore(t, func(t *testing.T, newEnv func(*configv1.Config, ...func(*routing.Options)) *env) {
		e := newEnv(cfgOf(settings(textJSON(600_000, 1_800_000, 2), allowedFails(100)), dep("a", "m"), dep("b", "m"), dep("c", "m")))
		req := e.request("m")
		h := &routing.History{Attempts: []routing.Attempt{
			{Deployment: "a", Model: "m", Class: failure.ClassTransient, Kind: failure.KindServerError, Status: 503, Message: "a is down"},
			{Deployment: "b", Model: "m", Class: failure.ClassTransient, Kind: failure.KindServerError, Status: 500, Message: "b failed"},
			{Deployment: "c", Model: "m", Class: failure.ClassIncompatible, Kind: failure.KindInvalidRequest, Status: 400, Message: "c cannot"},
		}}
		d := e.decide(req, h)
		if d.Action != routing.ActionStop {
			t.Fatalf("decision %+v, want a stop: two upstream attempts spend maxAttempts 2", d)
		}
		if d.Stop.Status != 500 || d.Stop.Message != "b failed" {
			t.Fatalf("stop %d %q, want the last upstream's: 500 %q", d.Stop.Status, d.Stop.Message, "b failed")
		}
	})
}
