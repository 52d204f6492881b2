package provider_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/extproc/provider"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

type hdr = dialect.Header

func dep(p failure.Provider, base, model, key, version string) *config.Deployment {
	return &config.Deployment{ID: "d1", PublicModel: "pub", Provider: p, BaseURL: base, ProviderModel: model, APIKey: key, APIVersion: version}
}

func TestPath(t *testing.T) {
	const (
		oa  = failure.ProviderOpenAI
		az  = failure.ProviderAzureOpenAI
		an  = failure.ProviderAnthropic
		oac = failure.ProviderOpenAICompatible
	)
	for _, tc := range []struct {
		name      string
		d         *config.Deployment
		dialect   dialect.Dialect
		scheme    string
		authority string
		path      string
	}{
		{"openai bare host", dep(oa, "https://api.openai.com", "gpt-4o", "k", ""), dialect.Chat, "https", "api.openai.com", "/v1/chat/completions"},
		{"openai /v1 base", dep(oa, "https://api.openai.com/v1/", "gpt-4o", "k", ""), dialect.Responses, "https", "api.openai.com", "/v1/responses"},
		{"compatible host:port/v1", dep(oac, "http://vllm:8000/v1", "llama", "", ""), dialect.Chat, "http", "vllm:8000", "/v1/chat/completions"},
		{"compatible deeper root", dep(oac, "https://openrouter.ai/api/v1", "x", "k", ""), dialect.Embeddings, "https", "openrouter.ai", "/api/v1/embeddings"},
		{"compatible root without v1 (Gemini)", dep(oac, "https://generativelanguage.googleapis.com/v1beta/openai/", "g", "k", ""), dialect.Chat, "https", "generativelanguage.googleapis.com", "/v1beta/openai/chat/completions"},
		{"azure chat", dep(az, "https://res.openai.azure.com", "prod 4o", "k", "2024-10-21"), dialect.Chat, "https", "res.openai.azure.com", "/openai/deployments/prod%204o/chat/completions?api-version=2024-10-21"},
		{"azure embeddings behind a prefix", dep(az, "https://apim.example.com/ai/", "embed", "k", "2024-10-21"), dialect.Embeddings, "https", "apim.example.com", "/ai/openai/deployments/embed/embeddings?api-version=2024-10-21"},
		{"azure responses", dep(az, "https://res.openai.azure.com", "prod", "k", "2025-04-01-preview"), dialect.Responses, "https", "res.openai.azure.com", "/openai/responses?api-version=2025-04-01-preview"},
		{"azure v1 base", dep(az, "https://res.openai.azure.com/openai/v1", "prod", "k", ""), dialect.Chat, "https", "res.openai.azure.com", "/openai/v1/chat/completions"},
		{"azure v1 base, preview", dep(az, "https://res.openai.azure.com/openai/v1/", "prod", "k", "preview"), dialect.Responses, "https", "res.openai.azure.com", "/openai/v1/responses?api-version=preview"},
		{"azure apiVersion v1", dep(az, "https://res.openai.azure.com:8443", "prod", "k", "v1"), dialect.Embeddings, "https", "res.openai.azure.com:8443", "/openai/v1/embeddings"},
		{"azure v1 latest", dep(az, "https://res.openai.azure.com/openai/v1", "prod", "k", "latest"), dialect.Chat, "https", "res.openai.azure.com", "/openai/v1/chat/completions"},
		{"anthropic", dep(an, "https://api.anthropic.com", "claude", "k", ""), dialect.Messages, "https", "api.anthropic.com", "/v1/messages"},
		{"anthropic /v1 base not doubled", dep(an, "https://api.anthropic.com/v1/", "claude", "k", ""), dialect.Messages, "https", "api.anthropic.com", "/v1/messages"},
		{"anthropic prefix", dep(an, "http://gw:9000/anthropic", "claude", "k", ""), dialect.Messages, "http", "gw:9000", "/anthropic/v1/messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, err := provider.Compile(tc.d)
			if err != nil {
				t.Fatal(err)
			}
			rw, err := up.Rewrite(provider.Input{Dialect: tc.dialect, Body: []byte(`{"model":"` + tc.d.ProviderModel + `"}`)})
			if err != nil {
				t.Fatal(err)
			}
			if rw.Scheme != tc.scheme || rw.Authority != tc.authority || rw.Path != tc.path {
				t.Errorf("got %s://%s%s, want %s://%s%s", rw.Scheme, rw.Authority, rw.Path, tc.scheme, tc.authority, tc.path)
			}
		})
	}
}

func TestCompileRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    *config.Deployment
	}{
		{"azure classic without api-version", dep(failure.ProviderAzureOpenAI, "https://r.openai.azure.com", "m", "k", "")},
		{"no scheme", dep(failure.ProviderOpenAI, "api.openai.com", "m", "k", "")},
		{"ftp", dep(failure.ProviderOpenAI, "ftp://h", "m", "k", "")},
		{"query", dep(failure.ProviderOpenAI, "https://h/v1?x=1", "m", "k", "")},
		{"user info", dep(failure.ProviderOpenAI, "https://u:p@h", "m", "k", "")},
		{"unknown provider", dep("bedrock", "https://h", "m", "k", "")},
		{"bad URL", dep(failure.ProviderOpenAI, "https://h/%zz", "m", "k", "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := provider.Compile(tc.d); err == nil {
				t.Fatal("Compile accepted it")
			}
		})
	}
}

func TestSpeaks(t *testing.T) {
	all := []dialect.Dialect{dialect.Chat, dialect.Responses, dialect.Embeddings, dialect.Messages}
	for p, want := range map[failure.Provider][]dialect.Dialect{
		failure.ProviderOpenAI:           {dialect.Chat, dialect.Responses, dialect.Embeddings},
		failure.ProviderAzureOpenAI:      {dialect.Chat, dialect.Responses, dialect.Embeddings},
		failure.ProviderOpenAICompatible: {dialect.Chat, dialect.Responses, dialect.Embeddings},
		failure.ProviderAnthropic:        {dialect.Messages},
		"bedrock":                        nil,
	} {
		for _, d := range all {
			if got := provider.Speaks(p, d); got != slices.Contains(want, d) {
				t.Errorf("Speaks(%s, %s) = %v", p, d, got)
			}
		}
	}
	up, err := provider.Compile(dep(failure.ProviderAnthropic, "https://api.anthropic.com", "c", "k", ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up.Rewrite(provider.Input{Dialect: dialect.Chat, Body: []byte(`{"model":"c"}`)}); !errors.Is(err, provider.ErrDialect) {
		t.Fatalf("chat on anthropic: %v, want ErrDialect", err)
	}
}

func names(ns ...string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, n := range ns {
			if !yield(n) {
				return
			}
		}
	}
}

// TestRewriteHeaders: the provider's credential is set, every other credential header and
// every switchyard header removed, anthropic-version defaulted or kept for Anthropic and
// removed elsewhere; Set and Remove never share a name.
func TestRewriteHeaders(t *testing.T) {
	client := names(":path", "authorization", "x-api-key", "x-switchyard-state", "x-switchyard-cluster", "anthropic-version", "content-type", "x-stainless-retry-count")
	for _, tc := range []struct {
		name       string
		d          *config.Deployment
		dialect    dialect.Dialect
		anthVer    string
		set        []hdr
		remove     []string
		mustRemove []string
	}{
		{"openai", dep(failure.ProviderOpenAI, "https://api.openai.com", "m", "sk-prov", ""), dialect.Chat, "2023-06-01",
			[]hdr{{Name: "authorization", Value: "Bearer sk-prov"}},
			[]string{"proxy-authorization", "api-key", "x-api-key", "anthropic-version", "anthropic-beta", "openai-organization", "openai-project", "x-unified-routing-metadata", "x-switchyard-state", "x-switchyard-cluster"}, nil},
		{"compatible without key sets nothing, removes the client's", dep(failure.ProviderOpenAICompatible, "http://h:1/v1", "m", "", ""), dialect.Chat, "",
			[]hdr{}, nil, []string{"authorization", "x-api-key", "api-key", "x-switchyard-state"}},
		{"azure", dep(failure.ProviderAzureOpenAI, "https://r.openai.azure.com", "m", "az-prov", "2024-10-21"), dialect.Embeddings, "",
			[]hdr{{Name: "api-key", Value: "az-prov"}},
			[]string{"authorization", "proxy-authorization", "x-api-key", "anthropic-version", "anthropic-beta", "openai-organization", "openai-project", "x-unified-routing-metadata", "x-switchyard-state", "x-switchyard-cluster"}, nil},
		{"anthropic default version", dep(failure.ProviderAnthropic, "https://api.anthropic.com", "m", "ant-prov", ""), dialect.Messages, "",
			[]hdr{{Name: "x-api-key", Value: "ant-prov"}, {Name: "anthropic-version", Value: "2023-06-01"}},
			[]string{"authorization", "proxy-authorization", "api-key", "openai-organization", "openai-project", "x-unified-routing-metadata", "x-switchyard-state", "x-switchyard-cluster"}, nil},
		{"anthropic keeps the client's version", dep(failure.ProviderAnthropic, "https://api.anthropic.com", "m", "ant-prov", ""), dialect.Messages, "2026-10-21",
			[]hdr{{Name: "x-api-key", Value: "ant-prov"}, {Name: "anthropic-version", Value: "2026-10-21"}}, nil, []string{"authorization"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, err := provider.Compile(tc.d)
			if err != nil {
				t.Fatal(err)
			}
			rw, err := up.Rewrite(provider.Input{Dialect: tc.dialect, Body: []byte(`{"model":"m"}`), HeaderNames: client, AnthropicVersion: tc.anthVer})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rw.Set, tc.set) {
				t.Errorf("Set = %v, want %v", rw.Set, tc.set)
			}
			if tc.remove != nil && !slices.Equal(rw.Remove, tc.remove) {
				t.Errorf("Remove = %v, want %v", rw.Remove, tc.remove)
			}
			for _, n := range tc.mustRemove {
				if !slices.Contains(rw.Remove, n) {
					t.Errorf("%s not removed: %v", n, rw.Remove)
				}
			}
			for _, h := range rw.Set {
				if slices.Contains(rw.Remove, h.Name) {
					t.Errorf("%s both set and removed", h.Name)
				}
			}
		})
	}
}

// TestRewriteRemoveIsNotShared: one rewrite's x-switchyard-* names never leak into the
// next rewrite of the same Upstream.
func TestRewriteRemoveIsNotShared(t *testing.T) {
	up, err := provider.Compile(dep(failure.ProviderOpenAI, "https://api.openai.com", "m", "k", ""))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := up.Rewrite(provider.Input{Dialect: dialect.Chat, Body: []byte(`{"model":"m"}`), HeaderNames: names("x-switchyard-a")})
	b, _ := up.Rewrite(provider.Input{Dialect: dialect.Chat, Body: []byte(`{"model":"m"}`), HeaderNames: names("x-switchyard-b")})
	c, _ := up.Rewrite(provider.Input{Dialect: dialect.Chat, Body: []byte(`{"model":"m"}`)})
	if !slices.Contains(a.Remove, "x-switchyard-a") || slices.Contains(b.Remove, "x-switchyard-a") || !slices.Contains(b.Remove, "x-switchyard-b") ||
		slices.Contains(c.Remove, "x-switchyard-a") || slices.Contains(c.Remove, "x-switchyard-b") {
		t.Fatalf("a=%v b=%v c=%v", a.Remove, b.Remove, c.Remove)
	}
}

func TestRewriteBody(t *testing.T) {
	const (
		oa = failure.ProviderOpenAI
		az = failure.ProviderAzureOpenAI
	)
	for _, tc := range []struct {
		name string
		d    *config.Deployment
		in   provider.Input
		want string // "" = unchanged
	}{
		{"model rewritten", dep(oa, "https://h", "gpt-4o-2024-08-06", "k", ""),
			provider.Input{Dialect: dialect.Chat, Body: []byte(`{"model":"gpt-4o","messages":[]}`)},
			`{"model":"gpt-4o-2024-08-06","messages":[]}`},
		{"same model: body untouched", dep(oa, "https://h", "gpt-4o", "k", ""),
			provider.Input{Dialect: dialect.Chat, Body: []byte(`{"model":"gpt-4o"}`)}, ""},
		{"stream usage added, model kept", dep(oa, "https://h", "gpt-4o", "k", ""),
			provider.Input{Dialect: dialect.Chat, Stream: true, IncludeUsage: true, Body: []byte(`{"model":"gpt-4o","stream":true}`)},
			`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true}}`},
		{"stream usage and model", dep(oa, "https://h", "p", "k", ""),
			provider.Input{Dialect: dialect.Chat, Stream: true, IncludeUsage: true, Body: []byte(`{"model":"gpt-4o","stream":true,"stream_options":{"include_obfuscation":false}}`)},
			`{"model":"p","stream":true,"stream_options":{"include_obfuscation":false,"include_usage":true}}`},
		{"usage already asked", dep(oa, "https://h", "gpt-4o", "k", ""),
			provider.Input{Dialect: dialect.Chat, Stream: true, IncludeUsage: true, Body: []byte(`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true}}`)}, ""},
		{"usage false is overridden", dep(oa, "https://h", "gpt-4o", "k", ""),
			provider.Input{Dialect: dialect.Chat, Stream: true, IncludeUsage: true, Body: []byte(`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":false}}`)},
			`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true}}`},
		{"no usage without the flag", dep(oa, "https://h", "gpt-4o", "k", ""),
			provider.Input{Dialect: dialect.Chat, Stream: true, Body: []byte(`{"model":"gpt-4o","stream":true}`)}, ""},
		{"no usage for JSON", dep(oa, "https://h", "gpt-4o", "k", ""),
			provider.Input{Dialect: dialect.Chat, IncludeUsage: true, Body: []byte(`{"model":"gpt-4o"}`)}, ""},
		{"no usage for responses", dep(oa, "https://h", "gpt-5", "k", ""),
			provider.Input{Dialect: dialect.Responses, Stream: true, IncludeUsage: true, Body: []byte(`{"model":"gpt-5","stream":true}`)}, ""},
		{"azure old api-version: no usage", dep(az, "https://r", "dep", "k", "2024-06-01"),
			provider.Input{Dialect: dialect.Chat, Stream: true, IncludeUsage: true, Body: []byte(`{"model":"dep","stream":true}`)}, ""},
		{"azure new api-version: usage", dep(az, "https://r", "dep", "k", "2024-10-21"),
			provider.Input{Dialect: dialect.Chat, Stream: true, IncludeUsage: true, Body: []byte(`{"model":"gpt-4o","stream":true}`)},
			`{"model":"dep","stream":true,"stream_options":{"include_usage":true}}`},
		{"azure v1: usage", dep(az, "https://r/openai/v1", "dep", "k", ""),
			provider.Input{Dialect: dialect.Chat, Stream: true, IncludeUsage: true, Body: []byte(`{"model":"dep","stream":true}`)},
			`{"model":"dep","stream":true,"stream_options":{"include_usage":true}}`},
		{"anthropic model", dep(failure.ProviderAnthropic, "https://a", "claude-sonnet-4-5-20250929", "k", ""),
			provider.Input{Dialect: dialect.Messages, Stream: true, IncludeUsage: true, Body: []byte(`{"model":"claude","max_tokens":5,"stream":true}`)},
			`{"model":"claude-sonnet-4-5-20250929","max_tokens":5,"stream":true}`},
		{"escaped model compares decoded", dep(oa, "https://h", "gpt-4o", "k", ""),
			provider.Input{Dialect: dialect.Chat, Body: []byte(`{"model":"gpt\u002d4o"}`)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, err := provider.Compile(tc.d)
			if err != nil {
				t.Fatal(err)
			}
			orig := string(tc.in.Body)
			rw, err := up.Rewrite(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(tc.in.Body) != orig {
				t.Fatalf("client body changed: %s", tc.in.Body)
			}
			cl := ""
			for _, h := range rw.Set {
				if h.Name == "content-length" {
					cl = h.Value
				}
			}
			if tc.want == "" {
				if rw.Body != nil || cl != "" || rw.ContentLength != len(orig) {
					t.Fatalf("body rewritten: %s (content-length %q, %d)", rw.Body, cl, rw.ContentLength)
				}
				return
			}
			if string(rw.Body) != tc.want || rw.ContentLength != len(tc.want) || cl != itoa(len(tc.want)) {
				t.Fatalf("body %s (content-length %q, %d), want %s", rw.Body, cl, rw.ContentLength, tc.want)
			}
		})
	}
}
