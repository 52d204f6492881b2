package routing_test

import (
	"net/http"
	"testing"
	"time"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store"
)

func provider(p string) func(*configv1.Deployment) {
	return func(d *configv1.Deployment) { d.Provider = p }
}

// TestTaxonomyDrivesRouting runs real provider error shapes (docs/wire-formats.md)
// through failure.Classify and the router, end to end, and checks the effect on the next
// decision and on the shared state.
func TestTaxonomyDrivesRouting(t *testing.T) {
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	cases := []struct {
		name     string
		provider string
		outcome  failure.Outcome
		// what follows
		wantNext  string // deployment of the next decision, or "" for a stop
		wantStop  int
		wantState func(t *testing.T, e *env)
	}{
		{
			name: "anthropic 529 overloaded fails over and counts a failure", provider: "anthropic",
			outcome:  failure.Outcome{Status: 529, Header: hdr("x-should-retry", "true"), Body: []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_01"}`)},
			wantNext: "b",
			wantState: func(t *testing.T, e *env) {
				if st := e.state("a"); st.Circuit.Failures != 1 || st.Metrics.Failures != 1 {
					t.Fatalf("529 not counted: %+v", st)
				}
			},
		},
		{
			name: "openai 429 with retry-after cools the failure domain", provider: "openai",
			outcome:  failure.Outcome{Status: 429, Header: hdr("retry-after", "12"), Body: []byte(`{"error":{"message":"Rate limit reached for gpt-4o.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`)},
			wantNext: "c",
			wantState: func(t *testing.T, e *env) {
				st := e.state("b") // b shares a's failure domain
				if !st.Capacity.Limited(e.clock.Now()) || st.Capacity.Until.Sub(e.clock.Now()) != 12*time.Second {
					t.Fatalf("domain capacity after a 429 with Retry-After 12: %+v", st.Capacity)
				}
			},
		},
		{
			name: "openai insufficient_quota is not retried against the domain", provider: "openai",
			outcome:  failure.Outcome{Status: 429, Body: []byte(`{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)},
			wantNext: "c",
			wantState: func(t *testing.T, e *env) {
				if st := e.state("b"); !st.Capacity.Quota {
					t.Fatalf("quota exhaustion not recorded on the domain: %+v", st.Capacity)
				}
			},
		},
		{
			name: "azure 401 quarantines", provider: "azure-openai",
			outcome:  failure.Outcome{Status: 401, Body: []byte(`{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint."}}`)},
			wantNext: "b",
			wantState: func(t *testing.T, e *env) {
				if st := e.state("a"); st.Circuit.Cause != store.CauseConfiguration {
					t.Fatalf("401 did not quarantine: %+v", st.Circuit)
				}
			},
		},
		{
			name: "anthropic prompt too long goes to the context_window chain", provider: "anthropic",
			outcome:  failure.Outcome{Status: 400, Body: []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 207791 tokens > 200000 maximum"}}`)},
			wantNext: "long",
		},
		{
			name: "azure content filter goes to the content_policy chain", provider: "azure-openai",
			outcome:  failure.Outcome{Status: 400, Body: []byte(`{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":true,"severity":"high"}}}}}`)},
			wantNext: "safe",
		},
		{
			name: "openai invalid parameter ends the request with the provider's 400", provider: "openai",
			outcome:  failure.Outcome{Status: 400, Body: []byte(`{"error":{"message":"Invalid 'temperature': decimal above maximum value.","type":"invalid_request_error","param":"temperature","code":"decimal_above_max_value"}}`)},
			wantStop: 400,
		},
		{
			name: "in-band anthropic overloaded error in a 200 stream fails over", provider: "anthropic",
			outcome:  failure.Outcome{Status: 200, InBand: true, Event: "error", Body: []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)},
			wantNext: "b",
		},
		{
			name: "connection refused fails over", provider: "openai",
			outcome:  failure.Outcome{Transport: failure.TransportConnect},
			wantNext: "b",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := withChains(cfgOf(settings(),
				dep("a", "m", provider(tc.provider), weight(1000), domain("acct")),
				dep("b", "m", provider(tc.provider), weight(10), domain("acct")),
				dep("c", "m", provider(tc.provider), weight(1)),
				dep("long", "m-long"), dep("safe", "m-safe")),
				chain("m", "context_window", "m-long"), chain("m", "content_policy", "m-safe"))
			e := newEnv(t, cfg, withRand(fixedRand(0)))
			req, h := e.request("m"), &routing.History{}
			d := e.mustAttempt(req, h)
			if d.Deployment.ID != "a" {
				t.Fatalf("first attempt on %s, want a", d.Deployment.ID)
			}
			tc.outcome.Provider = failure.Provider(tc.provider)
			c := failure.Classify(tc.outcome, e.clock.Now())
			e.run(req, h, d, c)
			next := e.decide(req, h)
			switch {
			case tc.wantStop != 0:
				if next.Action != routing.ActionStop || next.Stop.Status != tc.wantStop {
					t.Fatalf("next = %+v, want a stop with %d", next, tc.wantStop)
				}
			case next.Action != routing.ActionAttempt || next.Deployment.ID != tc.wantNext:
				t.Fatalf("next = %+v (stop %+v), want an attempt on %s", next.Deployment, next.Stop, tc.wantNext)
			}
			if tc.wantState != nil {
				tc.wantState(t, e)
			}
			if st := e.state("a"); st.Metrics.InFlight != 0 {
				t.Fatalf("in-flight leaked: %d", st.Metrics.InFlight)
			}
		})
	}
}
