package extproc

import (
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
)

func headerMapOf(kv ...string) headerMap {
	hm := &corev3.HeaderMap{}
	for i := 0; i < len(kv); i += 2 {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return headerMap{hm}
}

func TestClientResponseKeepsOnlyTheAllowList(t *testing.T) {
	h := headerMapOf(":status", "200", "content-type", "application/json", "content-length", "10",
		"x-request-id", "req_provider", "openai-organization", "org", "openai-project", "proj",
		"x-ratelimit-reset-requests", "6ms", "x-ms-region", "eastus", "set-cookie", "a=b",
		"server", "cloudflare", "x-some-new-provider-header", "v", "x-envoy-upstream-service-time", "3")
	m := clientResponse(h, "sy-1", dialect.OpenAI)
	want := []string{"x-request-id", "openai-organization", "openai-project", "x-ratelimit-reset-requests",
		"x-ms-region", "set-cookie", "server", "x-some-new-provider-header"}
	if !slices.Equal(m.remove, want) {
		t.Fatalf("removes %v, want %v", m.remove, want)
	}
	if len(m.set) != 1 || m.set[0] != (header{Name: "x-request-id", Value: "sy-1"}) {
		t.Fatalf("sets %v", m.set)
	}
	if a := clientResponse(h, "sy-1", dialect.Anthropic); a.set[0].Name != "request-id" {
		t.Fatalf("anthropic sets %v", a.set)
	}
	if _, dropped := attemptRules.sanitize(m); len(dropped) > 0 {
		t.Fatalf("Envoy would refuse %v", dropped)
	}
}

// TestRouteRoleAnswersCarryOnlySwitchyardHeaders: what the route role answers itself holds
// nothing of a provider.
func TestRouteRoleAnswersCarryOnlySwitchyardHeaders(t *testing.T) {
	allowed := func(name string) bool {
		return clientResponseHeaders[name] || name == dialect.HeaderRetryAfter || name == dialect.HeaderRetryAfterMS ||
			name == dialect.HeaderOpenAIRequestID || name == dialect.HeaderAnthropicRequestID
	}
	for _, f := range []dialect.Family{dialect.OpenAI, dialect.Anthropic} {
		e := &dialect.Error{Family: f, Status: 503, Code: "model_overloaded", Message: "m", RetryAfter: 2 * time.Second}
		for _, r := range []dialect.Response{e.Render("sy-1"), dialect.ModelsResponse(f, []string{"m"}, time.Unix(0, 0))} {
			for _, h := range r.Headers {
				if !allowed(h.Name) {
					t.Errorf("%v answer header %s", f, h.Name)
				}
			}
		}
	}
}
