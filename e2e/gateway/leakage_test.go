package gateway_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/extproc"
	"github.com/switchyard-gw/switchyard/internal/contract"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
)

// What of a provider reaches a client: never a configured key, whatever it looks like, nor
// the provider's headers or its model name; its request id only inside unified_routing.

// Credentials without a shape the message sanitiser knows: an Azure-style 32-character
// alphanumeric key, a Hugging Face token, and a client key of neither kind.
const (
	azureKey        = "Zq7Kx2Lm9Np4Rt6Vw8Yb1Cd3Fg5Hj0Ks"
	hfKey           = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"
	unshapedClient  = "ck_9f8e7d6c5b4a39281706f5e4d3c2b1a0"
	redactionMarker = "[REDACTED]"
)

// assertNoSecret fails when a key appears in the response's body or headers.
func assertNoSecret(t *testing.T, what string, resp *http.Response, body []byte) {
	t.Helper()
	for _, k := range []string{azureKey, hfKey, unshapedClient} {
		if strings.Contains(string(body), k) {
			t.Errorf("%s: body carries a key: %s", what, body)
		}
		for name, vs := range resp.Header {
			for _, v := range vs {
				if strings.Contains(v, k) {
					t.Errorf("%s: header %s carries a key", what, name)
				}
			}
		}
	}
}

func TestProviderErrorsNeverShowConfiguredKeys(t *testing.T) {
	g := startGateway(t, []deployment{
		{ID: "az", Model: "gpt-4o", ProviderModel: "gpt4o-prod", Kind: fakeprovider.Azure, Key: azureKey},
		{ID: "hf", Model: "llama", ProviderModel: "meta-llama-3", Kind: fakeprovider.OpenAI, Key: hfKey},
	}, gatewayOptions{})
	auth := map[string]string{"Authorization": "Bearer " + unshapedClient}
	with := func(fault string) map[string]string {
		return map[string]string{"Authorization": auth["Authorization"], fakeprovider.FaultHeader: fault}
	}
	cases := []struct {
		name, body, fault string
		stream            bool
	}{
		{"JSON error echoing the Azure key and the client's", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
			"error=bad_request; message=Access denied due to invalid subscription key " + azureKey + " (client " + unshapedClient + ")", false},
		{"JSON error echoing the hf_ key in message and param", `{"model":"llama","messages":[{"role":"user","content":"hi"}]}`,
			"error=bad_request; message=Token " + hfKey + " is not valid; param=" + hfKey, false},
		{"in-band SSE error after the commit", `{"model":"llama","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			"end=error; after=2; message=upstream failure for key " + hfKey + " and " + unshapedClient, true},
		{"in-band SSE error before the commit", `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			"end=error; after=0; error=bad_request; message=key " + azureKey + " refused", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := g.post("/v1/chat/completions", tc.body, with(tc.fault))
			assertNoSecret(t, tc.name, resp, body)
			if !strings.Contains(string(body), redactionMarker) {
				t.Fatalf("status %d body %s: the provider's message did not reach the client", resp.StatusCode, body)
			}
			if tc.stream && resp.StatusCode == http.StatusOK && !strings.Contains(string(body), "error") {
				t.Fatalf("no in-band error in %s", body)
			}
		})
	}
	for _, k := range []string{azureKey, hfKey, unshapedClient} {
		if strings.Contains(g.logs.String(), k) {
			t.Errorf("the log carries a key")
		}
	}
}

// providerHeader reports a response header a client must not see (docs/extproc.md,
// "Response headers").
func providerHeader(name string) bool {
	name = strings.ToLower(name)
	for _, p := range []string{"openai-", "x-ratelimit-", "anthropic-", "x-ms-", "apim-", "azureml-"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	for _, h := range contract.ProviderResponseHeaders() {
		if name == h {
			return true
		}
	}
	return false
}

func TestAnswersCarryNoProviderHeaders(t *testing.T) { forModes(t, testAnswersCarryNoProviderHeaders) }

func testAnswersCarryNoProviderHeaders(t *testing.T, xdsMode bool) {
	g := startGateway(t, []deployment{
		{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o-2024-11-20", Kind: fakeprovider.OpenAI},
		{ID: "az", Model: "azure-4o", ProviderModel: "gpt4o-prod", Kind: fakeprovider.Azure},
		{ID: "an", Model: "claude", ProviderModel: "claude-sonnet-4-20250514", Kind: fakeprovider.Anthropic},
	}, gatewayOptions{xds: xdsMode})
	extra := "header=openai-project:proj_fake; header=x-ms-deployment-name:gpt4o-prod; header=set-cookie:__cf_bm=abc; header=x-ms-client-request-id:c1"
	cases := []struct {
		name, path, body, providerModel string
		anthropic, stream               bool
	}{
		{"openai chat", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, "gpt-4o-2024-11-20", false, false},
		{"openai chat stream", "/v1/chat/completions", `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "gpt-4o-2024-11-20", false, true},
		{"openai responses", "/v1/responses", `{"model":"gpt-4o","input":"hi"}`, "gpt-4o-2024-11-20", false, false},
		{"openai responses stream", "/v1/responses", `{"model":"gpt-4o","stream":true,"input":"hi"}`, "gpt-4o-2024-11-20", false, true},
		{"azure chat", "/v1/chat/completions", `{"model":"azure-4o","messages":[{"role":"user","content":"hi"}]}`, "gpt4o-prod", false, false},
		{"azure chat stream", "/v1/chat/completions", `{"model":"azure-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "gpt4o-prod", false, true},
		{"anthropic messages", "/v1/messages", `{"model":"claude","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, "claude-sonnet-4-20250514", true, false},
		{"anthropic messages stream", "/v1/messages", `{"model":"claude","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "claude-sonnet-4-20250514", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"Authorization": "Bearer " + clientKey, extproc.HeaderRoutingMetadata: "true", fakeprovider.FaultHeader: extra}
			if tc.anthropic {
				h["anthropic-version"] = "2023-06-01"
			}
			resp, body := g.post(tc.path, tc.body, h)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d body %s", resp.StatusCode, body)
			}
			for name := range resp.Header {
				if providerHeader(name) {
					t.Errorf("provider header %s: %q", name, resp.Header.Get(name))
				}
			}
			for _, name := range []string{"x-request-id", "request-id"} {
				if v := resp.Header.Get(name); strings.HasPrefix(v, "req_fake_") || strings.HasPrefix(v, "00000000-0000-4000-8000-") {
					t.Errorf("%s is the provider's id %q", name, v)
				}
			}
			idHeader := "x-request-id"
			if tc.anthropic {
				idHeader = "request-id"
			}
			if resp.Header.Get(idHeader) == "" {
				t.Errorf("no switchyard request id in %s", idHeader)
			}
			if strings.Contains(string(body), tc.providerModel) {
				t.Errorf("the provider's model %q reached the client: %s", tc.providerModel, body)
			}
			if !tc.stream {
				if m := gjson.GetBytes(body, "model").String(); m == "" || !strings.Contains(tc.body, `"model":"`+m+`"`) {
					t.Errorf("model %q, want the public model", m)
				}
			}
			// The provider's id is in unified_routing, and only there.
			if !strings.Contains(string(body), `"provider_request_id":"req_fake_`) && !strings.Contains(string(body), `"provider_request_id":"00000000-0000-4000-8000-`) {
				t.Errorf("unified_routing has no provider_request_id: %s", body)
			}
		})
	}
}

// TestUnifiedRoutingNamesEachAttemptsProviderRequestID: a failed attempt's provider id
// survives the redirect in the state.
func TestUnifiedRoutingNamesEachAttemptsProviderRequestID(t *testing.T) {
	g := startGateway(t, twoDeployments(deployment{}), gatewayOptions{settings: priceBased()})
	resp, body := g.post("/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{extproc.HeaderRoutingMetadata: "true", "Authorization": "Bearer " + clientKey, fakeprovider.FaultHeader: "server=a; status=500"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	atts := gjson.GetBytes(body, "unified_routing.attempts").Array()
	if len(atts) != 2 {
		t.Fatalf("attempts %s", gjson.GetBytes(body, "unified_routing").Raw)
	}
	for i, a := range atts {
		if id := a.Get("provider_request_id").String(); !strings.HasPrefix(id, "req_fake_") {
			t.Errorf("attempt %d (%s): provider_request_id %q", i+1, a.Get("deployment").String(), id)
		}
	}
}

// TestProviderHeadersGoWhenTheAttemptRoleIsDown: the attempt role dies while the provider
// thinks; Envoy fails open and the answer passes unprocessed, but the route still removes
// the provider headers it lists.
func TestProviderHeadersGoWhenTheAttemptRoleIsDown(t *testing.T) {
	forModes(t, func(t *testing.T, xdsMode bool) {
		g := startGateway(t, []deployment{{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI}}, gatewayOptions{xds: xdsMode})
		done := g.postAsync("/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{fakeprovider.FaultHeader: "header-delay=1s; header=openai-project:proj_fake; header=x-ms-region:eastus"})
		eventually(t, "the provider call", func() bool { return len(g.fakes["oa"].Requests()) == 1 })
		g.replicas[0].kill()
		r := awaitResult(t, done)
		if r.status != http.StatusOK {
			t.Fatalf("status %d body %s", r.status, r.body)
		}
		for name := range r.header {
			for _, h := range contract.ProviderResponseHeaders() {
				if strings.EqualFold(name, h) {
					t.Errorf("listed provider header %s passed: %q", name, r.header.Get(name))
				}
			}
		}
	})
}

// TestFinalErrorRetryAfterOnlyWhenItMeansSomething: OpenAI's x-ratelimit-reset-requests: 6ms
// on a 503 is no Retry-After; the provider's own Retry-After is passed on. Three deployments
// spend the three attempts of the default policy without a reuse wait, and no circuit opens.
func TestFinalErrorRetryAfterOnlyWhenItMeansSomething(t *testing.T) {
	hundred := uint32(100)
	var deps []deployment
	for _, id := range []string{"a", "b", "c"} {
		deps = append(deps, deployment{ID: id, Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI})
	}
	g := startGateway(t, deps, gatewayOptions{settings: &configv1.RouterSettings{AllowedFails: &hundred}})
	req := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	resp, body := g.post("/v1/chat/completions", req, map[string]string{"Authorization": "Bearer " + clientKey, fakeprovider.FaultHeader: "error=overloaded"})
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	if ra, ms := resp.Header.Get("Retry-After"), resp.Header.Get("Retry-After-Ms"); ra != "" || ms != "" {
		t.Errorf("Retry-After %q / retry-after-ms %q from a rate-limit reset hint", ra, ms)
	}
	resp, body = g.post("/v1/chat/completions", req, map[string]string{"Authorization": "Bearer " + clientKey, fakeprovider.FaultHeader: "error=overloaded; retry-after=2"})
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	if ra, ms := resp.Header.Get("Retry-After"), resp.Header.Get("Retry-After-Ms"); ra != "2" || ms != strconv.Itoa(2000) {
		t.Errorf("Retry-After %q / retry-after-ms %q, want the provider's 2 s", ra, ms)
	}
}
