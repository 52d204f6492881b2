package routing_test

import (
	"net/http"
	"testing"
	"time"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
)

// behaviour §7.2: a 429 on the only failure domain is waited out when its capacity circuit reopens
// within 60 s and a meaningful attempt still fits; otherwise the request stops with 429 and
// the Retry-After is when the circuit really reopens, not what the provider said.
func TestThrottleOnTheOnlyDomainWaitsForItsCapacityCircuit(t *testing.T) {
	onEachStore(t, func(t *testing.T, newEnv func(*configv1.Config, ...func(*routing.Options)) *env) {
		th := throttled
		th.RetryAfter = time.Second // throttleCooldownSeconds (5 s) is longer: the circuit holds 5 s
		t.Run("waits and retries", func(t *testing.T) {
			e := newEnv(cfgOf(settings(), dep("only", "m")), withRand(fixedRand(0)))
			req, h := e.request("m"), &routing.History{}
			e.run(req, h, e.mustAttempt(req, h), th)
			d := e.mustAttempt(req, h)
			if d.Deployment.ID != "only" || d.Move != routing.MoveRetry || d.Wait != 5*time.Second || d.ResponseTimeout < routing.MinAttemptTime {
				t.Fatalf("after a 429: %+v, want a retry of only after the 5s capacity circuit", d)
			}
			e.clock.Advance(d.Wait)
			e.run(req, h, d, th)
			// Budget of 3 attempts: the third waits again.
			d = e.mustAttempt(req, h)
			e.clock.Advance(d.Wait)
			e.run(req, h, d, th)
			st := e.mustStop(req, h)
			if st.Status != http.StatusTooManyRequests || st.RetryAfter != 5*time.Second {
				t.Fatalf("budget spent after 429s: %+v, want 429 with the circuit's Retry-After 5s (the provider said 1s)", st)
			}
		})
		t.Run("circuit beyond 60s", func(t *testing.T) {
			e := newEnv(cfgOf(settings(), dep("only", "m")), withRand(fixedRand(0)))
			long := throttled
			long.RetryAfter = 90 * time.Second
			req, h := e.request("m"), &routing.History{}
			e.run(req, h, e.mustAttempt(req, h), long)
			st := e.mustStop(req, h)
			if st.Status != http.StatusTooManyRequests || st.RetryAfter != 90*time.Second {
				t.Fatalf("capacity circuit of 90s: %+v, want 429 at once with Retry-After 90s", st)
			}
		})
		t.Run("wait beyond the deadline", func(t *testing.T) {
			e := newEnv(cfgOf(settings(textJSON(4_000, 5_000, 3)), dep("only", "m")), withRand(fixedRand(0)))
			req, h := e.request("m"), &routing.History{}
			e.run(req, h, e.mustAttempt(req, h), th)
			st := e.mustStop(req, h)
			if st.Status != http.StatusTooManyRequests || st.RetryAfter != 5*time.Second {
				t.Fatalf("capacity wait beyond the deadline: %+v, want 429 with Retry-After 5s", st)
			}
		})
	})
}
