package dialect_test

import (
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
)

var created = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestModelsBody(t *testing.T) {
	for _, tc := range []struct {
		name  string
		f     dialect.Family
		names []string
		want  string
	}{
		{"openai", dialect.OpenAI, []string{"gpt-4o", "claude"},
			`{"object":"list","data":[{"id":"gpt-4o","object":"model","created":1796040000,"owned_by":"switchyard"},{"id":"claude","object":"model","created":1796040000,"owned_by":"switchyard"}]}`},
		{"openai empty", dialect.OpenAI, nil, `{"object":"list","data":[]}`},
		{"anthropic", dialect.Anthropic, []string{"a", "b"},
			`{"data":[{"type":"model","id":"a","display_name":"a","created_at":"2026-11-30T12:00:00Z"},{"type":"model","id":"b","display_name":"b","created_at":"2026-11-30T12:00:00Z"}],"has_more":false,"first_id":"a","last_id":"b"}`},
		{"anthropic empty", dialect.Anthropic, []string{}, `{"data":[],"has_more":false,"first_id":null,"last_id":null}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(dialect.ModelsBody(tc.f, tc.names, created)); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	if got := string(dialect.ModelBody(dialect.OpenAI, "m/x", created)); got != `{"id":"m/x","object":"model","created":1796040000,"owned_by":"switchyard"}` {
		t.Errorf("ModelBody openai %s", got)
	}
	if got := string(dialect.ModelBody(dialect.Anthropic, "m", created)); got != `{"type":"model","id":"m","display_name":"m","created_at":"2026-11-30T12:00:00Z"}` {
		t.Errorf("ModelBody anthropic %s", got)
	}
}
