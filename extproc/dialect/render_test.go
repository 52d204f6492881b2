package dialect_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

type hdr = dialect.Header

// TestRender pins every shape byte for byte: OpenAI's {"error":{message,type,param,code}}
// with nulls, Anthropic's {"type":"error","error":{type,message,details},"request_id"}, the
// request-id header of each dialect and Retry-After rounded up beside retry-after-ms.
func TestRender(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     *dialect.Error
		status  int
		headers []hdr
		body    string
	}{
		{"openai model not found", dialect.ModelNotFound(dialect.OpenAI, "gpt-9"), 404,
			[]hdr{{Name: "content-type", Value: "application/json"}, {Name: "x-request-id", Value: "rid-1"}},
			`{"error":{"message":"The model ` + "`gpt-9`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":"model","code":"model_not_found"}}`},
		{"anthropic model not found", dialect.ModelNotFound(dialect.Anthropic, "claude-9"), 404,
			[]hdr{{Name: "content-type", Value: "application/json"}, {Name: "request-id", Value: "rid-1"}},
			`{"type":"error","error":{"type":"not_found_error","message":"The model ` + "`claude-9`" + ` does not exist or you do not have access to it.","details":{"error_code":"model_not_found"}},"request_id":"rid-1"}`},
		{"openai unknown path", dialect.UnknownPath(dialect.OpenAI, "POST", "/v1/completions"), 404,
			[]hdr{{Name: "content-type", Value: "application/json"}, {Name: "x-request-id", Value: "rid-1"}},
			`{"error":{"message":"Invalid URL (POST /v1/completions)","type":"invalid_request_error","param":null,"code":"unknown_url"}}`},
		{"anthropic too large", dialect.TooLarge(dialect.Anthropic, 1024), 413,
			[]hdr{{Name: "content-type", Value: "application/json"}, {Name: "request-id", Value: "rid-1"}},
			`{"type":"error","error":{"type":"request_too_large","message":"The request body is larger than the gateway's limit of 1024 bytes.","details":{"error_code":"request_too_large"}},"request_id":"rid-1"}`},
		{"openai retry after rounds up", &dialect.Error{Family: dialect.OpenAI, Status: 429, Code: "rate_limit_exceeded", Message: "slow down", RetryAfter: 1200 * time.Millisecond}, 429,
			[]hdr{{Name: "content-type", Value: "application/json"}, {Name: "retry-after", Value: "2"}, {Name: "retry-after-ms", Value: "1200"}, {Name: "x-request-id", Value: "rid-1"}},
			`{"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`},
		{"anthropic sub-millisecond retry after", &dialect.Error{Family: dialect.Anthropic, Status: 503, Code: "model_overloaded", Message: "m", RetryAfter: time.Microsecond}, 503,
			[]hdr{{Name: "content-type", Value: "application/json"}, {Name: "retry-after", Value: "1"}, {Name: "retry-after-ms", Value: "1"}, {Name: "request-id", Value: "rid-1"}},
			`{"type":"error","error":{"type":"overloaded_error","message":"m","details":{"error_code":"model_overloaded"}},"request_id":"rid-1"}`},
		{"openai upstream without type or code (Azure)", &dialect.Error{Family: dialect.OpenAI, Status: 500, Message: "boom"}, 500,
			[]hdr{{Name: "content-type", Value: "application/json"}, {Name: "x-request-id", Value: "rid-1"}},
			`{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`},
		{"anthropic without code has no details", &dialect.Error{Family: dialect.Anthropic, Status: 529, Type: "overloaded_error", Message: "Overloaded"}, 529,
			[]hdr{{Name: "content-type", Value: "application/json"}, {Name: "request-id", Value: "rid-1"}},
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"rid-1"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.err.Render("rid-1")
			if r.Status != tc.status || !slices.Equal(r.Headers, tc.headers) || string(r.Body) != tc.body {
				t.Errorf("Render =\n %d %v\n %s\nwant\n %d %v\n %s", r.Status, r.Headers, r.Body, tc.status, tc.headers, tc.body)
			}
		})
	}
}

func TestRenderWithoutRequestID(t *testing.T) {
	for _, f := range []dialect.Family{dialect.OpenAI, dialect.Anthropic} {
		r := dialect.ModelNotFound(f, "m").Render("")
		if len(r.Headers) != 1 || r.Headers[0].Name != "content-type" {
			t.Errorf("%v headers %v", f, r.Headers)
		}
		var m map[string]any
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatal(err)
		}
		if _, ok := m["request_id"]; ok {
			t.Errorf("%v: request_id in %s", f, r.Body)
		}
	}
}

// TestFromStop maps each routing stop to both dialects: status and code kept, the type
// named for the dialect, an upstream's own type kept where the dialect has it.
func TestFromStop(t *testing.T) {
	for _, tc := range []struct {
		name        string
		stop        routing.StopError
		openAIType  string
		anthropType string
		retryAfter  string
	}{
		{"rate limited", routing.StopError{Status: 429, Code: "rate_limit_exceeded", Message: "m", RetryAfter: 3 * time.Second, Kind: failure.KindRateLimit},
			"rate_limit_error", "rate_limit_error", "3"},
		{"overloaded", routing.StopError{Status: 503, Code: "model_overloaded", Message: "m", RetryAfter: 2500 * time.Millisecond},
			"service_unavailable_error", "overloaded_error", "3"},
		{"unavailable", routing.StopError{Status: 503, Code: "model_unavailable", Message: "m"},
			"service_unavailable_error", "api_error", ""},
		{"model not found", routing.StopError{Status: 404, Code: "model_not_found", Message: "m"},
			"invalid_request_error", "not_found_error", ""},
		{"capability unsupported", routing.StopError{Status: 400, Code: "capability_unsupported", Message: "m"},
			"invalid_request_error", "invalid_request_error", ""},
		{"timeout", routing.StopError{Status: 504, Code: "timeout", Message: "m"},
			"timeout_error", "timeout_error", ""},
		{"gateway error", routing.StopError{Status: 500, Code: "gateway_error", Message: "m"},
			"server_error", "api_error", ""},
		{"upstream openai context overflow", routing.StopError{Status: 400, Code: "context_length_exceeded", Type: "invalid_request_error", Message: "m", Upstream: true},
			"invalid_request_error", "invalid_request_error", ""},
		{"upstream openai tokens 429", routing.StopError{Status: 429, Code: "rate_limit_exceeded", Type: "tokens", Message: "m", Upstream: true, RetryAfter: time.Second},
			"tokens", "rate_limit_error", "1"},
		{"upstream anthropic overloaded", routing.StopError{Status: 529, Type: "overloaded_error", Message: "Overloaded", Upstream: true},
			"server_error", "overloaded_error", ""},
		{"upstream anthropic permission", routing.StopError{Status: 403, Type: "permission_error", Message: "m", Upstream: true},
			"permission_error", "permission_error", ""},
		{"upstream azure 401 without type", routing.StopError{Status: 401, Code: "401", Message: "m", Upstream: true},
			"authentication_error", "authentication_error", ""},
		{"own stop ignores a type", routing.StopError{Status: 503, Code: "model_overloaded", Type: "tokens", Message: "m"},
			"service_unavailable_error", "overloaded_error", ""},
		{"no status", routing.StopError{Code: "gateway_error", Message: "m"}, "server_error", "api_error", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				f    dialect.Family
				typ  string
				path string
			}{{dialect.OpenAI, tc.openAIType, "error.type"}, {dialect.Anthropic, tc.anthropType, "error.type"}} {
				r := dialect.FromStop(c.f, &tc.stop).Render("req-7")
				wantStatus := tc.stop.Status
				if wantStatus == 0 {
					wantStatus = http.StatusInternalServerError
				}
				var body struct {
					Type  string `json:"type"`
					Error struct {
						Type, Message string
						Code          *string
						Details       struct {
							ErrorCode string `json:"error_code"`
						}
					}
					RequestID string `json:"request_id"`
				}
				if err := json.Unmarshal(r.Body, &body); err != nil {
					t.Fatal(err)
				}
				code := body.Error.Details.ErrorCode
				if c.f == dialect.OpenAI && body.Error.Code != nil {
					code = *body.Error.Code
				}
				if r.Status != wantStatus || body.Error.Type != c.typ || code != tc.stop.Code || body.Error.Message != tc.stop.Message {
					t.Errorf("%v: %d %s, want %d type %s code %s", c.f, r.Status, r.Body, wantStatus, c.typ, tc.stop.Code)
				}
				if c.f == dialect.Anthropic && (body.Type != "error" || body.RequestID != "req-7") {
					t.Errorf("anthropic envelope %s", r.Body)
				}
				if got := headerValue(r.Headers, "retry-after"); got != tc.retryAfter {
					t.Errorf("%v: retry-after %q, want %q", c.f, got, tc.retryAfter)
				}
			}
		})
	}
}

func headerValue(hs []dialect.Header, name string) string {
	for _, h := range hs {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}
