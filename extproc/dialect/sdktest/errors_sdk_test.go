package sdktest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/routing"
)

// serve answers every request with r, as the route role's ImmediateResponse would.
func serve(t *testing.T, r dialect.Response) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for _, h := range r.Headers {
			w.Header().Add(h.Name, h.Value)
		}
		w.WriteHeader(r.Status)
		_, _ = w.Write(r.Body)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

func sdkCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sdkCases are the errors the route role answers with, from parsing and from routing.
func sdkCases() []struct {
	name string
	err  func(dialect.Family) *dialect.Error
} {
	stop := func(s routing.StopError) func(dialect.Family) *dialect.Error {
		return func(f dialect.Family) *dialect.Error { return dialect.FromStop(f, &s) }
	}
	return []struct {
		name string
		err  func(dialect.Family) *dialect.Error
	}{
		{"model not found", func(f dialect.Family) *dialect.Error { return dialect.ModelNotFound(f, "nope") }},
		{"too large", func(f dialect.Family) *dialect.Error { return dialect.TooLarge(f, 10) }},
		{"unknown path", func(f dialect.Family) *dialect.Error { return dialect.UnknownPath(f, "POST", "/v1/x") }},
		{"rate limited", stop(routing.StopError{Status: 429, Code: "rate_limit_exceeded", Message: "Rate limit reached.", RetryAfter: 1500 * time.Millisecond})},
		{"overloaded", stop(routing.StopError{Status: 503, Code: "model_overloaded", Message: "Cooling down.", RetryAfter: 4 * time.Second})},
		{"unavailable", stop(routing.StopError{Status: 503, Code: "model_unavailable", Message: "Unavailable."})},
		{"capability", stop(routing.StopError{Status: 400, Code: "capability_unsupported", Message: "No deployment supports tools."})},
		{"timeout", stop(routing.StopError{Status: 504, Code: "timeout", Message: "Deadline passed."})},
		{"upstream context overflow", stop(routing.StopError{Status: 400, Code: "context_length_exceeded", Type: "invalid_request_error", Message: "Too long.", Upstream: true})},
		{"upstream anthropic overloaded", stop(routing.StopError{Status: 529, Type: "overloaded_error", Message: "Overloaded", Upstream: true})},
	}
}

// TestOpenAISDKParsesErrors: openai-go returns *openai.Error with every field of the body,
// and the request id and Retry-After reach it as headers, on every OpenAI endpoint.
func TestOpenAISDKParsesErrors(t *testing.T) {
	for _, tc := range sdkCases() {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.err(dialect.OpenAI)
			r := want.Render("req-abc")
			c := openai.NewClient(option.WithBaseURL(serve(t, r)+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
			calls := map[string]func() error{
				"chat": func() error {
					_, err := c.Chat.Completions.New(sdkCtx(t), openai.ChatCompletionNewParams{Model: "m",
						Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
					return err
				},
				"responses": func() error {
					_, err := c.Responses.New(sdkCtx(t), responsesParams())
					return err
				},
				"embeddings": func() error {
					_, err := c.Embeddings.New(sdkCtx(t), openai.EmbeddingNewParams{Model: "e",
						Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
					return err
				},
			}
			for name, call := range calls {
				var e *openai.Error
				if err := call(); !errors.As(err, &e) {
					t.Fatalf("%s: err = %v, want *openai.Error", name, err)
				}
				wantType := gjson.GetBytes(r.Body, "error.type").String()
				if e.StatusCode != want.Status || e.Code != want.Code || e.Param != want.Param || e.Message != want.Message || e.Type != wantType || wantType == "" {
					t.Errorf("%s: got %d code=%q param=%q type=%q msg=%q; want %+v", name, e.StatusCode, e.Code, e.Param, e.Type, e.Message, want)
				}
				if got := e.Response.Header.Get("x-request-id"); got != "req-abc" {
					t.Errorf("%s: x-request-id %q", name, got)
				}
				if want.RetryAfter > 0 && e.Response.Header.Get("retry-after-ms") == "" {
					t.Errorf("%s: no retry-after-ms", name)
				}
			}
		})
	}
}

// TestAnthropicSDKParsesErrors: anthropic-sdk-go returns *anthropic.Error with the type,
// message, request id and details.error_code.
func TestAnthropicSDKParsesErrors(t *testing.T) {
	for _, tc := range sdkCases() {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.err(dialect.Anthropic)
			r := want.Render("req-abc")
			c := anthropic.NewClient(anthropicoption.WithBaseURL(serve(t, r)), anthropicoption.WithAPIKey("k"), anthropicoption.WithMaxRetries(0))
			_, err := c.Messages.New(sdkCtx(t), anthropic.MessageNewParams{Model: "c", MaxTokens: 5,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
			var e *anthropic.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *anthropic.Error", err)
			}
			wantType := gjson.GetBytes(r.Body, "error.type").String()
			if e.StatusCode != want.Status || string(e.Type()) != wantType || wantType == "" || e.Message != want.Message ||
				e.RequestID != "req-abc" || e.Details.ErrorCode != want.Code {
				t.Errorf("got %d type=%q msg=%q rid=%q code=%q; want %+v type %q", e.StatusCode, e.Type(), e.Message, e.RequestID, e.Details.ErrorCode, want, wantType)
			}
		})
	}
}

func responsesParams() responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
}
