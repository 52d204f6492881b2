package fakeprovider

import (
	"testing"

	"github.com/tidwall/gjson"
)

// TestAdmission: requests the provider itself would refuse get its exact refusal, before
// any fault applies.
func TestAdmission(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       Options
		path, body string
		hdr        map[string]string
		wantStatus int
		wantPath   string // gjson path in the body …
		wantValue  string // … and its value
	}{
		{name: "openai_no_key", opts: Options{Kind: OpenAI, APIKey: openAIKey}, path: "/v1/chat/completions", body: `{"model":"m"}`,
			wantStatus: 401, wantPath: "error.type", wantValue: "invalid_request_error"},
		{name: "openai_bad_path", opts: Options{Kind: OpenAI}, path: "/v1/completions", body: `{}`,
			wantStatus: 404, wantPath: "error.message", wantValue: "Invalid URL (POST /v1/completions)"},
		{name: "openai_bad_json", opts: Options{Kind: OpenAI}, path: "/v1/chat/completions", body: `{"model":`,
			wantStatus: 400, wantPath: "error.type", wantValue: "invalid_request_error"},
		{name: "openai_no_model", opts: Options{Kind: OpenAI}, path: "/v1/responses", body: `{"input":"x"}`,
			wantStatus: 400, wantPath: "error.param", wantValue: "model"},
		{name: "azure_bad_path", opts: Options{Kind: Azure}, path: "/openai/deployments/d/completions?api-version=1", body: `{}`,
			wantStatus: 404, wantPath: "error.message", wantValue: "Resource not found"},
		{name: "azure_bearer_ok", opts: Options{Kind: Azure, APIKey: azureKey}, path: "/openai/deployments/d/chat/completions?api-version=1", body: `{}`,
			hdr: map[string]string{"Authorization": "Bearer " + azureKey}, wantStatus: 200, wantPath: "object", wantValue: "chat.completion"},
		{name: "anthropic_x_api_key_ok", opts: Options{Kind: Anthropic, APIKey: anthropicKey}, path: "/v1/messages",
			body: `{"model":"c","max_tokens":5,"messages":[]}`, hdr: map[string]string{"x-api-key": anthropicKey, "anthropic-version": "2023-06-01"},
			wantStatus: 200, wantPath: "type", wantValue: "message"},
		{name: "anthropic_no_key", opts: Options{Kind: Anthropic, APIKey: anthropicKey}, path: "/v1/messages", body: `{}`,
			hdr: map[string]string{"anthropic-version": "2023-06-01"}, wantStatus: 401, wantPath: "error.message", wantValue: "x-api-key header is required"},
		{name: "anthropic_no_version", opts: Options{Kind: Anthropic}, path: "/v1/messages", body: `{"model":"c","max_tokens":5,"messages":[]}`,
			wantStatus: 400, wantPath: "error.message", wantValue: "anthropic-version: header is required"},
		{name: "anthropic_no_max_tokens", opts: Options{Kind: Anthropic}, path: "/v1/messages", body: `{"model":"c","messages":[]}`,
			hdr: map[string]string{"anthropic-version": "2023-06-01"}, wantStatus: 400, wantPath: "error.message", wantValue: "max_tokens: Field required"},
		{name: "anthropic_unknown_model", opts: Options{Kind: Anthropic, Models: []string{"claude-a"}}, path: "/v1/messages",
			body: `{"model":"claude-b","max_tokens":5,"messages":[]}`, hdr: map[string]string{"anthropic-version": "2023-06-01"},
			wantStatus: 404, wantPath: "error.type", wantValue: "not_found_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, base := start(t, tc.opts)
			hdr := map[string]string{FaultHeader: "server_error"} // must not apply to refused requests
			for k, v := range tc.hdr {
				hdr[k] = v
			}
			if tc.wantStatus == 200 {
				delete(hdr, FaultHeader)
			}
			res := post(t, nil, base+tc.path, tc.body, hdr)
			b := readAll(t, res)
			if res.StatusCode != tc.wantStatus || gjson.GetBytes(b, tc.wantPath).String() != tc.wantValue {
				t.Errorf("status %d body %s", res.StatusCode, b)
			}
			if r, _ := s.LastRequest(); r.Status != tc.wantStatus || r.Fault != nil {
				t.Errorf("recorded status %d fault %+v", r.Status, r.Fault)
			}
		})
	}
}

// TestNewRejectsBadOptions: configuration mistakes fail at New, not at request time.
func TestNewRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{
		{},
		{Kind: OpenAI, Deployments: map[string]string{"d": ""}},
		{Kind: OpenAI, Content: Content{PromptTokens: 3, CachedTokens: 5}},
		{Kind: Anthropic, Content: Content{ToolCall: &ToolCall{Arguments: "{not json"}}},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}
