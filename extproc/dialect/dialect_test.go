package dialect_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		method   string
		path     string
		anthVer  bool
		want     dialect.Route
		notFound dialect.Family // checked when want.Op == 0
	}{
		{"chat", "POST", "/v1/chat/completions", false, dialect.Route{Op: dialect.OpCreate, Dialect: dialect.Chat, Family: dialect.OpenAI}, 0},
		{"chat with query", "POST", "/v1/chat/completions?api-version=x&y", false, dialect.Route{Op: dialect.OpCreate, Dialect: dialect.Chat, Family: dialect.OpenAI}, 0},
		{"responses", "POST", "/v1/responses", false, dialect.Route{Op: dialect.OpCreate, Dialect: dialect.Responses, Family: dialect.OpenAI}, 0},
		{"embeddings", "POST", "/v1/embeddings?", false, dialect.Route{Op: dialect.OpCreate, Dialect: dialect.Embeddings, Family: dialect.OpenAI}, 0},
		{"messages", "POST", "/v1/messages?beta=true", true, dialect.Route{Op: dialect.OpCreate, Dialect: dialect.Messages, Family: dialect.Anthropic}, 0},
		{"messages without anthropic-version is still Anthropic", "POST", "/v1/messages", false, dialect.Route{Op: dialect.OpCreate, Dialect: dialect.Messages, Family: dialect.Anthropic}, 0},
		{"list models openai", "GET", "/v1/models", false, dialect.Route{Op: dialect.OpListModels, Family: dialect.OpenAI}, 0},
		{"list models anthropic", "GET", "/v1/models?limit=20", true, dialect.Route{Op: dialect.OpListModels, Family: dialect.Anthropic}, 0},
		{"get model", "GET", "/v1/models/gpt-4o?x=1", false, dialect.Route{Op: dialect.OpGetModel, Family: dialect.OpenAI, ModelID: "gpt-4o"}, 0},
		{"get model with slash, escaped", "GET", "/v1/models/meta-llama%2FLlama-3", true, dialect.Route{Op: dialect.OpGetModel, Family: dialect.Anthropic, ModelID: "meta-llama/Llama-3"}, 0},
		{"get model with raw slash", "GET", "/v1/models/org/m", false, dialect.Route{Op: dialect.OpGetModel, Family: dialect.OpenAI, ModelID: "org/m"}, 0},
		{"unknown path", "POST", "/v1/completions", false, dialect.Route{}, dialect.OpenAI},
		{"unknown path, anthropic-version", "POST", "/v1/complete", true, dialect.Route{}, dialect.Anthropic},
		{"unknown messages sub-path", "POST", "/v1/messages/count_tokens", false, dialect.Route{}, dialect.Anthropic},
		{"GET on chat", "GET", "/v1/chat/completions", false, dialect.Route{}, dialect.OpenAI},
		{"POST on models", "POST", "/v1/models", false, dialect.Route{}, dialect.OpenAI},
		{"trailing slash is another path", "POST", "/v1/chat/completions/", false, dialect.Route{}, dialect.OpenAI},
		{"bad escape", "GET", "/v1/models/%zz", false, dialect.Route{}, dialect.OpenAI},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dialect.Match(tc.method, tc.path, tc.anthVer)
			if tc.want.Op == 0 {
				var e *dialect.Error
				if !errors.As(err, &e) || e.Status != http.StatusNotFound || e.Family != tc.notFound || e.Code != dialect.CodeUnknownURL {
					t.Fatalf("Match = %+v, %v; want 404 in %v", got, err, tc.notFound)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Match = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
