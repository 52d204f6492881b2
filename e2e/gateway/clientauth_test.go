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

	"github.com/switchyard-gw/switchyard/admin"
	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/extproc"
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
