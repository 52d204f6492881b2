package routing_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

// TestFinalStopRetryAfterOnlyWhenItMeansSomething: a final upstream 503 passes on the
// provider's own Retry-After, never a wait read from x-ratelimit-reset-* (a rate window's
// refill, 6 ms here): an SDK with retries on would come back at once.
func TestFinalStopRetryAfterOnlyWhenItMeansSomething(t *testing.T) {
	body := []byte(`{"error":{"message":"The server is overloaded.","type":"server_error","code":"server_is_overloaded"}}`)
	for _, tc := range []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"reset hint only", http.Header{"X-Ratelimit-Reset-Requests": {"6ms"}, "X-Ratelimit-Remaining-Requests": {"0"}}, 0},
		{"provider Retry-After", http.Header{"Retry-After": {"2"}, "X-Ratelimit-Reset-Requests": {"6ms"}}, 2 * time.Second},
		{"provider retry-after-ms", http.Header{"Retry-After-Ms": {"1500"}}, 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, cfgOf(settings(textJSON(600_000, 1_800_000, 1), allowedFails(100)), dep("only", "m")))
			req, h := e.request("m"), &routing.History{}
			c := failure.Classify(failure.Outcome{Provider: failure.ProviderOpenAI, Status: http.StatusServiceUnavailable, Header: tc.header, Body: body}, e.clock.Now())
			if c.RetryAfter <= 0 {
				t.Fatalf("classification has no wait for routing: %+v", c)
			}
			e.run(req, h, e.mustAttempt(req, h), c)
			st := e.mustStop(req, h)
			if st.Status != http.StatusServiceUnavailable || !st.Upstream || st.RetryAfter != tc.want {
				t.Fatalf("stop %+v, want the upstream 503 with Retry-After %v", st, tc.want)
			}
		})
	}
}
