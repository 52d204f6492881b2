package provider_test

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/extproc/provider"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

const clientKey = "sk-client-must-not-leak"

// send applies rw to the client's request the way Envoy applies the attempt role's
// mutations (removes, then sets; the new body with its content-length) and sends it.
func send(t *testing.T, client http.Header, clientBody []byte, rw provider.Rewrite) *http.Response {
	t.Helper()
	u, err := url.Parse(rw.Scheme + "://" + rw.Authority + rw.Path)
	if err != nil {
		t.Fatal(err)
	}
	h := client.Clone()
	for _, n := range rw.Remove {
		h.Del(n)
	}
	for _, s := range rw.Set {
		h.Set(s.Name, s.Value)
	}
	body := clientBody
	if rw.Body != nil {
		body = rw.Body
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	h.Del("content-length")
	req.Header = h
	// A content-length that disagrees with the body fails the send (net/http checks it).
	req.ContentLength = int64(rw.ContentLength)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Body.Close() })
	return res
}

// TestRewriteAcceptedByFakeProvider: for every provider kind and dialect, the rewritten
// request is accepted by e2e/fakeprovider, which checks paths, api-version, credentials
// and required headers as the real providers do, and what it received carries the
// provider's key and model, never the client's key nor a switchyard header.
func TestRewriteAcceptedByFakeProvider(t *testing.T) {
	const (
		oaKey  = "sk-provider"
		azKey  = "azure-provider"
		antKey = "ant-provider"
	)
	oa := fakeprovider.Options{Kind: fakeprovider.OpenAI, APIKey: oaKey, Models: []string{"gpt-4o-2024-08-06", "text-embedding-3-small"}}
	compat := fakeprovider.Options{Kind: fakeprovider.OpenAI, Models: []string{"llama-3"}}
	az := fakeprovider.Options{Kind: fakeprovider.Azure, APIKey: azKey, Deployments: map[string]string{"prod-4o": "gpt-4o-2024-08-06"}}
	ant := fakeprovider.Options{Kind: fakeprovider.Anthropic, APIKey: antKey, Models: []string{"claude-sonnet-4-5-20250929"}}
	chat := `{"model":"pub","messages":[{"role":"user","content":"hi"}]}`
	chatStream := `{"model":"pub","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	resp := `{"model":"pub","input":"hi"}`
	emb := `{"model":"pub","input":"hi"}`
	msgs := `{"model":"pub","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name     string
		opts     fakeprovider.Options
		p        failure.Provider
		suffix   string // added to the fake's URL for the base URL
		model    string
		key      string
		version  string
		d        dialect.Dialect
		body     string
		stream   bool
		wantPath string
		wantCred [2]string
		// wantModel is what the fake reports as the request's model (the Azure deployment).
		wantModel string
	}{
		{"openai chat", oa, failure.ProviderOpenAI, "", "gpt-4o-2024-08-06", oaKey, "", dialect.Chat, chat, false, "/v1/chat/completions", [2]string{"Authorization", "Bearer " + oaKey}, "gpt-4o-2024-08-06"},
		{"openai chat stream with usage", oa, failure.ProviderOpenAI, "/v1", "gpt-4o-2024-08-06", oaKey, "", dialect.Chat, chatStream, true, "/v1/chat/completions", [2]string{"Authorization", "Bearer " + oaKey}, "gpt-4o-2024-08-06"},
		{"openai responses", oa, failure.ProviderOpenAI, "", "gpt-4o-2024-08-06", oaKey, "", dialect.Responses, resp, false, "/v1/responses", [2]string{"Authorization", "Bearer " + oaKey}, "gpt-4o-2024-08-06"},
		{"openai embeddings", oa, failure.ProviderOpenAI, "", "text-embedding-3-small", oaKey, "", dialect.Embeddings, emb, false, "/v1/embeddings", [2]string{"Authorization", "Bearer " + oaKey}, "text-embedding-3-small"},
		{"openai-compatible /v1 base, no key", compat, failure.ProviderOpenAICompatible, "/v1/", "llama-3", "", "", dialect.Chat, chat, false, "/v1/chat/completions", [2]string{}, "llama-3"},
		{"azure chat", az, failure.ProviderAzureOpenAI, "", "prod-4o", azKey, "2024-10-21", dialect.Chat, chat, false, "/openai/deployments/prod-4o/chat/completions", [2]string{"Api-Key", azKey}, "prod-4o"},
		{"azure chat stream with usage", az, failure.ProviderAzureOpenAI, "", "prod-4o", azKey, "2024-10-21", dialect.Chat, chatStream, true, "/openai/deployments/prod-4o/chat/completions", [2]string{"Api-Key", azKey}, "prod-4o"},
		{"azure embeddings", az, failure.ProviderAzureOpenAI, "", "prod-4o", azKey, "2024-10-21", dialect.Embeddings, emb, false, "/openai/deployments/prod-4o/embeddings", [2]string{"Api-Key", azKey}, "prod-4o"},
		{"azure responses", az, failure.ProviderAzureOpenAI, "", "prod-4o", azKey, "2025-04-01-preview", dialect.Responses, resp, false, "/openai/responses", [2]string{"Api-Key", azKey}, "prod-4o"},
		{"azure v1 chat", az, failure.ProviderAzureOpenAI, "/openai/v1", "prod-4o", azKey, "", dialect.Chat, chat, false, "/openai/v1/chat/completions", [2]string{"Api-Key", azKey}, "prod-4o"},
		{"azure v1 via apiVersion", az, failure.ProviderAzureOpenAI, "", "prod-4o", azKey, "v1", dialect.Responses, resp, false, "/openai/v1/responses", [2]string{"Api-Key", azKey}, "prod-4o"},
		{"anthropic", ant, failure.ProviderAnthropic, "", "claude-sonnet-4-5-20250929", antKey, "", dialect.Messages, msgs, false, "/v1/messages", [2]string{"X-Api-Key", antKey}, "claude-sonnet-4-5-20250929"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ts := fakeprovider.NewTestServer(t, tc.opts)
			up, err := provider.Compile(&config.Deployment{ID: "d", Provider: tc.p, BaseURL: ts.URL + tc.suffix,
				ProviderModel: tc.model, APIKey: tc.key, APIVersion: tc.version})
			if err != nil {
				t.Fatal(err)
			}
			client := http.Header{}
			client.Set("Authorization", "Bearer "+clientKey)
			client.Set("X-Api-Key", clientKey)
			client.Set("Api-Key", clientKey)
			client.Set("Content-Type", "application/json")
			client.Set("X-Switchyard-State", "sealed-state")
			client.Set("X-Unified-Routing-Metadata", "true")
			client.Set("OpenAI-Organization", "org-client")
			if tc.d == dialect.Messages {
				client.Set("Anthropic-Version", "2023-06-01")
			}
			lower := func(yield func(string) bool) {
				for _, k := range slices.Sorted(maps.Keys(client)) {
					if !yield(strings.ToLower(k)) {
						return
					}
				}
			}
			rw, err := up.Rewrite(provider.Input{Dialect: tc.d, Stream: tc.stream, IncludeUsage: tc.stream, Body: []byte(tc.body),
				HeaderNames: lower, AnthropicVersion: client.Get("Anthropic-Version")})
			if err != nil {
				t.Fatal(err)
			}
			res := send(t, client, []byte(tc.body), rw)
			got, _ := io.ReadAll(res.Body)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("fake answered %d: %s", res.StatusCode, got)
			}
			r, ok := s.LastRequest()
			if !ok {
				t.Fatal("nothing recorded")
			}
			if r.Path != tc.wantPath || r.Model != tc.wantModel {
				t.Errorf("fake saw %s model %q, want %s model %q", r.Path, r.Model, tc.wantPath, tc.wantModel)
			}
			if tc.wantCred[0] != "" && r.Header.Get(tc.wantCred[0]) != tc.wantCred[1] {
				t.Errorf("%s = %q", tc.wantCred[0], r.Header.Get(tc.wantCred[0]))
			}
			for name, vs := range r.Header {
				if strings.HasPrefix(strings.ToLower(name), "x-switchyard-") || strings.EqualFold(name, "x-unified-routing-metadata") {
					t.Errorf("provider saw %s", name)
				}
				for _, v := range vs {
					if strings.Contains(v, clientKey) {
						t.Errorf("provider saw the client's key in %s", name)
					}
				}
			}
			if v := r.Header.Get("OpenAI-Organization"); v != "" {
				t.Errorf("provider saw the client's organization %q", v)
			}
			if tc.stream && !r.Get("stream_options.include_usage").Bool() {
				t.Errorf("stream usage not asked: %s", r.Body)
			}
			if tc.stream && !strings.Contains(string(got), `"usage":{`) {
				t.Errorf("stream carried no usage chunk")
			}
		})
	}
}
