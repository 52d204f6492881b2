package fakeprovider

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

const anthropicKey = "sk-ant-test-0001"

func anthropicClient(base string, opts ...option.RequestOption) *anthropic.Client {
	c := anthropic.NewClient(append([]option.RequestOption{
		option.WithBaseURL(base),
		option.WithAPIKey(anthropicKey),
		option.WithMaxRetries(0),
	}, opts...)...)
	return &c
}

func messageParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 256,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	}
}

// TestAnthropicMessagesJSON: the SDK decodes the Message; input_tokens excludes the cache,
// which is reported as cache_read_input_tokens (wire-formats §6).
func TestAnthropicMessagesJSON(t *testing.T) {
	s, base := start(t, Options{Kind: Anthropic, APIKey: anthropicKey, Content: Content{PromptTokens: 30, CachedTokens: 10}})
	msg, err := anthropicClient(base).Messages.New(ctxTimeout(t, 10*time.Second), messageParams())
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != defaultText || msg.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("content=%+v stop=%s", msg.Content, msg.StopReason)
	}
	if msg.Usage.InputTokens != 20 || msg.Usage.CacheReadInputTokens != 10 || msg.Usage.OutputTokens != 4 {
		t.Errorf("usage %s", msg.Usage.RawJSON())
	}
	// anthropic-sdk-go v2 sends the key as Bearer (option/requestoption.go WithAPIKey),
	// not x-api-key; the fake accepts both, as the API does (wire-formats §3.1).
	r, _ := s.LastRequest()
	if r.Header.Get("Authorization") != "Bearer "+anthropicKey || r.Header.Get("anthropic-version") == "" || r.Get("max_tokens").Int() != 256 {
		t.Errorf("recorded headers %v body %s", r.Header, r.Body)
	}
}

// TestAnthropicStream: Message.Accumulate rebuilds text, stop_reason and the cumulative
// usage from the SSE events (ping included, which the SDK skips).
func TestAnthropicStream(t *testing.T) {
	for _, tc := range []struct {
		name      string
		maxTokens int64
		wantText  string
		wantStop  anthropic.StopReason
		wantOut   int64
	}{
		{name: "end_turn", maxTokens: 256, wantText: defaultText, wantStop: anthropic.StopReasonEndTurn, wantOut: 4},
		{name: "max_tokens", maxTokens: 3, wantText: strings.Join(split(defaultText, 4)[:3], ""), wantStop: anthropic.StopReasonMaxTokens, wantOut: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, base := start(t, Options{Kind: Anthropic, APIKey: anthropicKey})
			p := messageParams()
			p.MaxTokens = tc.maxTokens
			stream := anthropicClient(base).Messages.NewStreaming(ctxTimeout(t, 10*time.Second), p)
			var msg anthropic.Message
			var types []string
			for stream.Next() {
				ev := stream.Current()
				types = append(types, ev.Type)
				if err := msg.Accumulate(ev); err != nil {
					t.Fatal(err)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if msg.Content[0].Text != tc.wantText || msg.StopReason != tc.wantStop || msg.Usage.OutputTokens != tc.wantOut || msg.Usage.InputTokens != 12 {
				t.Errorf("text=%q stop=%s usage=%s", msg.Content[0].Text, msg.StopReason, msg.Usage.RawJSON())
			}
			if types[0] != "message_start" || types[len(types)-1] != "message_stop" {
				t.Errorf("events %v", types)
			}
		})
	}
}

// TestAnthropicToolUseStream: a tool_use block streams its input as input_json_delta and
// accumulates to the configured arguments with stop_reason tool_use.
func TestAnthropicToolUseStream(t *testing.T) {
	args := `{"city":"Oslo"}`
	_, base := start(t, Options{Kind: Anthropic, Content: Content{ToolCall: &ToolCall{Name: "get_weather", Arguments: args}}})
	stream := anthropicClient(base).Messages.NewStreaming(ctxTimeout(t, 10*time.Second), messageParams())
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	b := msg.Content[0]
	if b.Type != "tool_use" || b.Name != "get_weather" || string(b.Input) != args || b.ID != "toolu_fake_1" || msg.StopReason != anthropic.StopReasonToolUse {
		t.Errorf("block %+v stop %s", b, msg.StopReason)
	}
}

// TestAnthropicErrors: HTTP failures surface as *anthropic.Error with Anthropic's status
// and error type, the request-id header and the scripted retry headers.
func TestAnthropicErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		key        string
		fault      *Fault
		header     string
		wantStatus int
		wantType   string
		check      func(t *testing.T, e *anthropic.Error)
	}{
		{name: "overloaded_529", fault: &Fault{Error: Overloaded}, wantStatus: 529, wantType: "overloaded_error",
			check: func(t *testing.T, e *anthropic.Error) {
				if e.Response.Header.Get("x-should-retry") != "true" {
					t.Error("no x-should-retry: true")
				}
			}},
		{name: "rate_limit", fault: &Fault{Error: RateLimited, RetryAfter: "7"}, wantStatus: 429, wantType: "rate_limit_error",
			check: func(t *testing.T, e *anthropic.Error) {
				if e.Response.Header.Get("retry-after") != "7" {
					t.Errorf("retry-after = %q", e.Response.Header.Get("retry-after"))
				}
			}},
		{name: "quota", fault: &Fault{Error: QuotaExhausted}, wantStatus: 429, wantType: "rate_limit_error",
			check: func(t *testing.T, e *anthropic.Error) {
				if e.ErrorCode() != anthropic.ErrorCodeEnforcedSpendLimitReached {
					t.Errorf("error code = %q", e.ErrorCode())
				}
			}},
		{name: "prompt_too_long", fault: &Fault{Error: ContextOverflow}, wantStatus: 400, wantType: "invalid_request_error",
			check: func(t *testing.T, e *anthropic.Error) {
				if !strings.Contains(e.Message, "prompt is too long") {
					t.Errorf("message %q", e.Message)
				}
			}},
		{name: "content_policy", header: "content_policy", wantStatus: 400, wantType: "invalid_request_error"},
		{name: "wrong_key", key: "sk-ant-wrong", wantStatus: 401, wantType: "authentication_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, base := start(t, Options{Kind: Anthropic, APIKey: anthropicKey})
			if tc.fault != nil {
				s.Script(*tc.fault)
			}
			var opts []option.RequestOption
			if tc.key != "" {
				opts = append(opts, option.WithAPIKey(tc.key))
			}
			if tc.header != "" {
				opts = append(opts, option.WithHeader(FaultHeader, tc.header))
			}
			_, err := anthropicClient(base, opts...).Messages.New(ctxTimeout(t, 10*time.Second), messageParams())
			var e *anthropic.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *anthropic.Error", err, err)
			}
			if e.StatusCode != tc.wantStatus || string(e.Type()) != tc.wantType || e.Message == "" {
				t.Errorf("status=%d type=%q message=%q raw=%s", e.StatusCode, e.Type(), e.Message, e.RawJSON())
			}
			if e.RequestID == "" || !strings.Contains(e.RawJSON(), `"request_id":"`+e.RequestID+`"`) {
				t.Errorf("request id %q not in body %s", e.RequestID, e.RawJSON())
			}
			if tc.check != nil {
				tc.check(t, e)
			}
		})
	}
}

// TestAnthropicInbandError: "event: error" after a 200 surfaces from stream.Err() as an
// *anthropic.Error with status 200 and the in-band type (wire-formats §3.3).
func TestAnthropicInbandError(t *testing.T) {
	s, base := start(t, Options{Kind: Anthropic})
	s.Script(Fault{End: EndError, EndAfter: 2})
	stream := anthropicClient(base).Messages.NewStreaming(ctxTimeout(t, 10*time.Second), messageParams())
	var msg anthropic.Message
	for stream.Next() {
		_ = msg.Accumulate(stream.Current())
	}
	var e *anthropic.Error
	if err := stream.Err(); !errors.As(err, &e) {
		t.Fatalf("stream.Err() = %v (%T), want *anthropic.Error", err, err)
	}
	if e.StatusCode != 200 || e.Type() != "overloaded_error" || e.RequestID != "req_fake_000001" {
		t.Errorf("status=%d type=%q request id=%q", e.StatusCode, e.Type(), e.RequestID)
	}
	if want := strings.Join(split(defaultText, 4)[:2], ""); msg.Content[0].Text != want {
		t.Errorf("text before error = %q, want %q", msg.Content[0].Text, want)
	}
}
