package gateway_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/admin"
	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/extproc"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
)

// createClientKey makes a client key through the admin API over st, as an operator would.
func createClientKey(t *testing.T, api http.Handler, body string) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/admin/client-keys", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer mk")
	w := httptest.NewRecorder()
	api.ServeHTTP(w, req)
	var out struct{ Key string }
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || w.Code != http.StatusCreated || out.Key == "" {
		t.Fatalf("creating a client key: %d %s", w.Code, w.Body)
	}
	return out.Key
}

// TestClientKeysWithTheSDKs: with ClientAuthKeys the route role checks keys made through the
// admin API (admin.Verifier over the shared store). The official SDKs see a typed 401 for no
// key and for a wrong one, a 403 for a key restricted to another model, and succeed with an
// allowed key; no provider sees a refused request.
func TestClientKeysWithTheSDKs(t *testing.T) {
	st := memstore.New()
	g := startGateway(t, []deployment{
		{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI},
		{ID: "an", Model: "claude", ProviderModel: "claude-sonnet-4-5", Kind: fakeprovider.Anthropic},
	}, gatewayOptions{store: st, clientAuth: extproc.ClientAuth{Mode: extproc.ClientAuthKeys}})
	v, err := config.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	api, err := admin.NewAPI(admin.APIOptions{MasterKey: "mk", Config: st, Validator: v, ClientKeys: st})
	if err != nil {
		t.Fatal(err)
	}
	all := createClientKey(t, api, `{"name":"all"}`)
	claudeOnly := createClientKey(t, api, `{"name":"claude only","models":["claude"]}`)

	openaiWith := func(key string) *openai.Client { return g.openai(option.WithAPIKey(key)) }
	anthropicWith := func(key string) *anthropic.Client { return g.anthropic(anthropicoption.WithAPIKey(key)) }
	chatErr := func(key string) *openai.Error {
		t.Helper()
		_, err := openaiWith(key).Chat.Completions.New(ctxT(t), chat("gpt-4o"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("key given %v: err %v (%T), want *openai.Error", key != "", err, err)
		}
		return apiErr
	}
	messages := func(key string) error {
		_, err := anthropicWith(key).Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "claude", MaxTokens: 16,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		return err
	}

	if e := chatErr(""); e.StatusCode != http.StatusUnauthorized || e.Code != extproc.CodeInvalidAPIKey {
		t.Errorf("no key: %d %s, want 401 %s", e.StatusCode, e.Code, extproc.CodeInvalidAPIKey)
	}
	if e := chatErr("sy-0123456789abcdef_" + strings.Repeat("A", 43)); e.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong key: %d, want 401", e.StatusCode)
	}
	if e := chatErr(claudeOnly); e.StatusCode != http.StatusForbidden || e.Code != extproc.CodeModelNotAllowed {
		t.Errorf("key for another model: %d %s, want 403 %s", e.StatusCode, e.Code, extproc.CodeModelNotAllowed)
	}
	if _, err := openaiWith(all).Chat.Completions.New(ctxT(t), chat("gpt-4o")); err != nil {
		t.Fatalf("allowed key: %v", err)
	}
	if _, err := openaiWith("").Models.List(ctxT(t)); err == nil {
		t.Error("models listing without a key succeeded")
	}
	if page, err := openaiWith(all).Models.List(ctxT(t)); err != nil || len(page.Data) != 2 {
		t.Errorf("models listing with a key: %v", err)
	}

	var aErr *anthropic.Error
	if err := messages("sy-wrong"); !errors.As(err, &aErr) || aErr.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(aErr.RawJSON(), "authentication_error") {
		t.Errorf("anthropic wrong key: %v, want a 401 authentication_error", err)
	}
	if err := messages(claudeOnly); err != nil {
		t.Fatalf("anthropic allowed key: %v", err)
	}
	if got := g.served(); got["oa"] != 1 || got["an"] != 1 {
		t.Errorf("providers served %v, want one request each (the allowed ones)", got)
	}
	for _, k := range []string{all, claudeOnly} {
		if strings.Contains(g.logs.String(), k) {
			t.Fatal("a client key reached the logs")
		}
	}
}

// TestClientKeyAllowListCoversFallbacks: a gpt-4o-only key is never served gpt-4o-mini by
// the fallback chain. The target is a policy skip (unified_routing, the log record, the
// counter); when gpt-4o fails, the client hears what gpt-4o said. A key without an
// allow-list takes the same fallback. GET /v1/models lists only the key's models.
func TestClientKeyAllowListCoversFallbacks(t *testing.T) {
	st := memstore.New()
	g := startGateway(t, []deployment{
		{ID: "big", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI},
		{ID: "mini", Model: "gpt-4o-mini", ProviderModel: "gpt-4o-mini", Kind: fakeprovider.OpenAI},
	}, gatewayOptions{store: st, clientAuth: extproc.ClientAuth{Mode: extproc.ClientAuthKeys},
		chains: []*configv1.FallbackChain{{PublicModel: "gpt-4o", Reason: "general", Targets: []string{"gpt-4o-mini"}}}})
	v, err := config.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	api, err := admin.NewAPI(admin.APIOptions{MasterKey: "mk", Config: st, Validator: v, ClientKeys: st})
	if err != nil {
		t.Fatal(err)
	}
	only := createClientKey(t, api, `{"name":"gpt-4o only","models":["gpt-4o"]}`)
	all := createClientKey(t, api, `{"name":"all"}`)
	failBig := map[string]string{fakeprovider.FaultHeader: "server=big; status=500"}
	with := func(key string, h map[string]string) map[string]string {
		out := map[string]string{"authorization": "Bearer " + key, "x-unified-routing-metadata": "true"}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	policySkip := "/gpt-4o-mini:policy(the API key may not use this model)"

	resp, body := g.post("/v1/chat/completions", chatBody, with(only, nil))
	if u := gjson.GetBytes(body, "unified_routing"); resp.StatusCode != http.StatusOK || u.Get("deployment").String() != "big" ||
		skipsOf(u.Get("skipped")) != policySkip {
		t.Fatalf("gpt-4o-only key: %d %s, want big with skipped %s", resp.StatusCode, body, policySkip)
	}
	resp, body = g.post("/v1/chat/completions", chatBody, with(only, failBig))
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("gpt-4o-only key, gpt-4o failing: %d %s, want gpt-4o's 500 (no fallback to gpt-4o-mini)", resp.StatusCode, body)
	}
	if n := g.served()["mini"]; n != 0 {
		t.Fatalf("gpt-4o-mini served %d requests of a gpt-4o-only key", n)
	}
	stopped := g.records("request stopped")
	if len(stopped) != 1 || skipsOf(stopped[0].Get("skipped")) != policySkip {
		t.Errorf("request stopped records %v, want one naming %s", stopped, policySkip)
	}
	if n := g.skipsTotal("gpt-4o", "policy"); n != 2 {
		t.Errorf("switchyard_skips_total{reason=policy} = %v, want 2 (one per request)", n)
	}

	resp, body = g.post("/v1/chat/completions", chatBody, with(all, failBig))
	if u := gjson.GetBytes(body, "unified_routing"); resp.StatusCode != http.StatusOK || u.Get("deployment").String() != "mini" || !u.Get("fallback_used").Bool() {
		t.Fatalf("unrestricted key, gpt-4o failing: %d %s, want the fallback to mini", resp.StatusCode, body)
	}

	models := func(key string) []string {
		t.Helper()
		page, err := g.openai(option.WithAPIKey(key)).Models.List(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
		}
		return ids
	}
	if got := models(only); strings.Join(got, ",") != "gpt-4o" {
		t.Errorf("GET /v1/models with a gpt-4o-only key: %v, want [gpt-4o]", got)
	}
	if got := models(all); strings.Join(got, ",") != "gpt-4o,gpt-4o-mini" {
		t.Errorf("GET /v1/models with an unrestricted key: %v, want both", got)
	}
	_, err = g.openai(option.WithAPIKey(only)).Models.Get(ctxT(t), "gpt-4o-mini")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusForbidden {
		t.Errorf("GET /v1/models/gpt-4o-mini with a gpt-4o-only key: %v, want 403", err)
	}
}
