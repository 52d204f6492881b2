package fakeprovider

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
)

const openAIKey = "sk-test-fake-key-0001"

// openAIClient is the official SDK pointed at the fake, with retries off so that every
// scripted fault surfaces.
func openAIClient(base string, opts ...option.RequestOption) *openai.Client {
	c := openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(base + "/v1/"),
		option.WithAPIKey(openAIKey),
		option.WithMaxRetries(0),
	}, opts...)...)
	return &c
}

func chatParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}
}

// TestOpenAIChatJSON: the SDK decodes the non-streaming chat.completion, and usage agrees
// with the configured content.
func TestOpenAIChatJSON(t *testing.T) {
	s, base := start(t, Options{Kind: OpenAI, APIKey: openAIKey, Content: Content{CachedTokens: 4, ReasoningTokens: 3}})
	c := openAIClient(base)
	res, err := c.Chat.Completions.New(ctxTimeout(t, 10*time.Second), chatParams())
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Choices[0].Message.Content; got != defaultText {
		t.Errorf("content = %q, want %q", got, defaultText)
	}
	if res.Choices[0].FinishReason != "stop" || res.Model != "gpt-4o-mini" || res.ID != "chatcmpl-fake-1" {
		t.Errorf("finish=%q model=%q id=%q", res.Choices[0].FinishReason, res.Model, res.ID)
	}
	u := res.Usage
	// 4 pieces + 3 reasoning tokens; prompt includes the 4 cached tokens.
	if u.PromptTokens != 12 || u.CompletionTokens != 7 || u.TotalTokens != 19 ||
		u.PromptTokensDetails.CachedTokens != 4 || u.CompletionTokensDetails.ReasoningTokens != 3 {
		t.Errorf("usage = %s", u.RawJSON())
	}
	r, _ := s.LastRequest()
	if r.Header.Get("Authorization") != "Bearer "+openAIKey || r.Model != "gpt-4o-mini" || r.Stream || r.Status != 200 {
		t.Errorf("recorded %+v", r)
	}
}

// TestOpenAIChatStream: the SDK's accumulator rebuilds the text from the chunks, and the
// usage chunk appears exactly when stream_options.include_usage (or Fault.Usage) asks.
func TestOpenAIChatStream(t *testing.T) {
	for _, tc := range []struct {
		name      string
		include   bool
		fault     *Fault
		wantUsage bool
	}{
		{name: "include_usage", include: true, wantUsage: true},
		{name: "no_usage", include: false, wantUsage: false},
		{name: "forced_off", include: true, fault: &Fault{Usage: UsageOff}, wantUsage: false},
		{name: "forced_on", include: false, fault: &Fault{Usage: UsageOn}, wantUsage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, base := start(t, Options{Kind: OpenAI, APIKey: openAIKey})
			if tc.fault != nil {
				s.Script(*tc.fault)
			}
			p := chatParams()
			if tc.include {
				p.StreamOptions.IncludeUsage = openai.Bool(true)
			}
			stream := openAIClient(base).Chat.Completions.NewStreaming(ctxTimeout(t, 10*time.Second), p)
			var acc openai.ChatCompletionAccumulator
			var contentChunks int
			for stream.Next() {
				ch := stream.Current()
				if !acc.AddChunk(ch) {
					t.Fatalf("accumulator rejected chunk %s", ch.RawJSON())
				}
				if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
					contentChunks++
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if got := acc.Choices[0].Message.Content; got != defaultText {
				t.Errorf("content = %q", got)
			}
			if contentChunks != defaultChunks {
				t.Errorf("content chunks = %d, want %d", contentChunks, defaultChunks)
			}
			if acc.Choices[0].FinishReason != "stop" {
				t.Errorf("finish_reason = %q", acc.Choices[0].FinishReason)
			}
			gotUsage := acc.Usage.TotalTokens != 0
			if gotUsage != tc.wantUsage {
				t.Fatalf("usage present = %v, want %v (%s)", gotUsage, tc.wantUsage, acc.Usage.RawJSON())
			}
			if tc.wantUsage && (acc.Usage.PromptTokens != 12 || acc.Usage.CompletionTokens != 4 || acc.Usage.TotalTokens != 16) {
				t.Errorf("usage = %s", acc.Usage.RawJSON())
			}
		})
	}
}

// TestOpenAIChatToolCallStream: a streamed tool call accumulates to the configured name and
// arguments with finish_reason tool_calls.
func TestOpenAIChatToolCallStream(t *testing.T) {
	args := `{"city":"Lisbon","unit":"c"}`
	_, base := start(t, Options{Kind: OpenAI, Content: Content{ToolCall: &ToolCall{Name: "get_weather", Arguments: args}, Chunks: 5}})
	stream := openAIClient(base).Chat.Completions.NewStreaming(ctxTimeout(t, 10*time.Second), chatParams())
	var acc openai.ChatCompletionAccumulator
	var finished bool
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if tool, ok := acc.JustFinishedToolCall(); ok {
			finished = true
			if tool.Name != "get_weather" || tool.Arguments != args {
				t.Errorf("tool call = %+v", tool)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if !finished || acc.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("finished=%v finish_reason=%q", finished, acc.Choices[0].FinishReason)
	}
	if id := acc.Choices[0].Message.ToolCalls[0].ID; id != "call_fake_1" {
		t.Errorf("tool call id = %q", id)
	}
}

// TestOpenAIChatMaxTokens: max_completion_tokens below the piece count cuts the answer
// with finish_reason length, and usage counts what was sent.
func TestOpenAIChatMaxTokens(t *testing.T) {
	_, base := start(t, Options{Kind: OpenAI})
	p := chatParams()
	p.MaxCompletionTokens = openai.Int(2)
	res, err := openAIClient(base).Chat.Completions.New(ctxTimeout(t, 10*time.Second), p)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join(split(defaultText, defaultChunks)[:2], "")
	if res.Choices[0].FinishReason != "length" || res.Choices[0].Message.Content != want || res.Usage.CompletionTokens != 2 {
		t.Errorf("finish=%q content=%q usage=%s", res.Choices[0].FinishReason, res.Choices[0].Message.Content, res.Usage.RawJSON())
	}
}

// TestOpenAIErrors: every HTTP failure surfaces as *openai.Error with OpenAI's status,
// type and code (wire-formats §1.4), plus the scripted headers.
func TestOpenAIErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       Options
		key        string
		fault      *Fault
		header     string
		wantStatus int
		wantType   string
		wantCode   string
		wantParam  string
		wantHeader map[string]string
	}{
		{name: "wrong_key", key: "sk-wrong-key-9999", wantStatus: 401, wantType: "invalid_request_error", wantCode: "invalid_api_key"},
		{name: "unknown_model", opts: Options{Models: []string{"gpt-5"}}, wantStatus: 404, wantType: "invalid_request_error", wantCode: "model_not_found"},
		{name: "rate_limit", fault: &Fault{Error: RateLimited, RetryAfter: "2", RetryAfterMS: "1500"}, wantStatus: 429, wantType: "tokens", wantCode: "rate_limit_exceeded",
			wantHeader: map[string]string{"Retry-After": "2", "Retry-After-Ms": "1500", "X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "2s"}},
		{name: "quota", fault: &Fault{Error: QuotaExhausted}, wantStatus: 429, wantType: "insufficient_quota", wantCode: "insufficient_quota"},
		{name: "context_overflow", fault: &Fault{Error: ContextOverflow}, wantStatus: 400, wantType: "invalid_request_error", wantCode: "context_length_exceeded", wantParam: "messages"},
		{name: "content_policy", fault: &Fault{Error: ContentPolicy}, wantStatus: 400, wantType: "invalid_request_error", wantCode: "invalid_prompt"},
		{name: "overloaded", fault: &Fault{Error: Overloaded}, wantStatus: 503, wantType: "service_unavailable_error", wantCode: "server_is_overloaded"},
		{name: "status_only", fault: &Fault{Status: 500}, wantStatus: 500, wantType: "server_error"},
		{name: "override", fault: &Fault{Error: Overloaded, Status: 502, Code: "bad_gateway", Type: "upstream_error"}, wantStatus: 502, wantType: "upstream_error", wantCode: "bad_gateway"},
		{name: "header_fault", header: "error=server_error; header=x-should-retry:false", wantStatus: 500, wantType: "server_error",
			wantHeader: map[string]string{"X-Should-Retry": "false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Kind, opts.APIKey = OpenAI, openAIKey
			s, base := start(t, opts)
			if tc.fault != nil {
				s.Script(*tc.fault)
			}
			var reqOpts []option.RequestOption
			if tc.key != "" {
				reqOpts = append(reqOpts, option.WithAPIKey(tc.key))
			}
			if tc.header != "" {
				reqOpts = append(reqOpts, option.WithHeader(FaultHeader, tc.header))
			}
			_, err := openAIClient(base, reqOpts...).Chat.Completions.New(ctxTimeout(t, 10*time.Second), chatParams())
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v (%T), want *openai.Error", err, err)
			}
			if apiErr.StatusCode != tc.wantStatus || apiErr.Type != tc.wantType || apiErr.Code != tc.wantCode || apiErr.Param != tc.wantParam {
				t.Errorf("status=%d type=%q code=%q param=%q; raw %s", apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Param, apiErr.RawJSON())
			}
			if apiErr.Message == "" {
				t.Error("empty message")
			}
			for k, v := range tc.wantHeader {
				if got := apiErr.Response.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if got := apiErr.Response.Header.Get("x-request-id"); got == "" {
				t.Error("no x-request-id")
			}
		})
	}
}

// TestOpenAIChatInbandError: a data-only {"error":…} event after two pieces surfaces from
// stream.Err() as the SDK's StreamError (wire-formats §1.3), after exactly two pieces.
func TestOpenAIChatInbandError(t *testing.T) {
	s, base := start(t, Options{Kind: OpenAI})
	s.Script(Fault{End: EndError, EndAfter: 2})
	stream := openAIClient(base).Chat.Completions.NewStreaming(ctxTimeout(t, 10*time.Second), chatParams())
	var text strings.Builder
	for stream.Next() {
		if ch := stream.Current(); len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	var se *ssestream.StreamError
	if err := stream.Err(); !errors.As(err, &se) {
		t.Fatalf("stream.Err() = %v (%T), want *ssestream.StreamError", err, err)
	}
	if !strings.Contains(se.Message, `"type":"server_error"`) {
		t.Errorf("message = %s", se.Message)
	}
	if want := strings.Join(split(defaultText, defaultChunks)[:2], ""); text.String() != want {
		t.Errorf("text before error = %q, want %q", text.String(), want)
	}
}

// TestOpenAIResponsesStream: the Responses stream has named events whose sequence_number
// counts up from 0, its deltas rebuild the text and response.completed carries usage.
func TestOpenAIResponsesStream(t *testing.T) {
	_, base := start(t, Options{Kind: OpenAI, Content: Content{Text: "Streaming responses work.", Chunks: 5, PromptTokens: 20, CachedTokens: 8, ReasoningTokens: 2}})
	stream := openAIClient(base).Responses.NewStreaming(ctxTimeout(t, 10*time.Second), responses.ResponseNewParams{
		Model: "gpt-5",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	var types []string
	var text strings.Builder
	var final responses.Response
	for i := 0; stream.Next(); i++ {
		ev := stream.Current()
		if ev.SequenceNumber != int64(i) {
			t.Errorf("event %d (%s) sequence_number = %d", i, ev.Type, ev.SequenceNumber)
		}
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Errorf("events:\n got %v\nwant %v", types, want)
	}
	if text.String() != "Streaming responses work." || final.OutputText() != "Streaming responses work." {
		t.Errorf("text = %q, output_text = %q", text.String(), final.OutputText())
	}
	u := final.Usage
	if final.Status != "completed" || u.InputTokens != 20 || u.InputTokensDetails.CachedTokens != 8 || u.OutputTokens != 7 ||
		u.OutputTokensDetails.ReasoningTokens != 2 || u.TotalTokens != 27 {
		t.Errorf("status=%s usage=%s", final.Status, u.RawJSON())
	}
}

// TestOpenAIResponsesJSON: the non-streaming Response decodes, and max_output_tokens below
// the piece count gives status incomplete with reason max_output_tokens.
func TestOpenAIResponsesJSON(t *testing.T) {
	_, base := start(t, Options{Kind: OpenAI})
	c := openAIClient(base)
	p := responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
	res, err := c.Responses.New(ctxTimeout(t, 10*time.Second), p)
	if err != nil {
		t.Fatal(err)
	}
	if res.OutputText() != defaultText || res.Status != "completed" || res.Usage.OutputTokens != 4 || res.Usage.TotalTokens != 16 {
		t.Errorf("text=%q status=%s usage=%s", res.OutputText(), res.Status, res.Usage.RawJSON())
	}
	p.MaxOutputTokens = openai.Int(3)
	res, err = c.Responses.New(ctxTimeout(t, 10*time.Second), p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "incomplete" || res.IncompleteDetails.Reason != "max_output_tokens" || res.Usage.OutputTokens != 3 {
		t.Errorf("status=%s reason=%s usage=%s", res.Status, res.IncompleteDetails.Reason, res.Usage.RawJSON())
	}
}

// TestOpenAIResponsesInband: "event: error" (nested wire shape) surfaces as the SDK's
// StreamError, while response.failed is an ordinary terminal event whose
// response.error carries the code (wire-formats §2.2).
func TestOpenAIResponsesInband(t *testing.T) {
	p := responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}

	t.Run("error_event", func(t *testing.T) {
		s, base := start(t, Options{Kind: OpenAI})
		s.Script(Fault{End: EndError, EndAfter: 1, Error: ContextOverflow})
		stream := openAIClient(base).Responses.NewStreaming(ctxTimeout(t, 10*time.Second), p)
		for stream.Next() {
		}
		var se *ssestream.StreamError
		if err := stream.Err(); !errors.As(err, &se) {
			t.Fatalf("stream.Err() = %v, want *ssestream.StreamError", err)
		}
		if se.Event.Type != "error" || !strings.Contains(se.Message, "context_length_exceeded") {
			t.Errorf("event %q message %s", se.Event.Type, se.Message)
		}
	})
	t.Run("response_failed", func(t *testing.T) {
		s, base := start(t, Options{Kind: OpenAI})
		s.Script(Fault{End: EndFailed, EndAfter: 2, Error: Overloaded})
		stream := openAIClient(base).Responses.NewStreaming(ctxTimeout(t, 10*time.Second), p)
		var last responses.ResponseStreamEventUnion
		for stream.Next() {
			last = stream.Current()
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if last.Type != "response.failed" || last.Response.Status != "failed" || last.Response.Error.Code != "server_is_overloaded" {
			t.Errorf("last event %s status %s error %s", last.Type, last.Response.Status, last.Response.Error.RawJSON())
		}
	})
}

// TestOpenAIResponsesToolCall: a function call arrives as a function_call output item, in
// JSON and as streamed function_call_arguments deltas.
func TestOpenAIResponsesToolCall(t *testing.T) {
	args := `{"city":"Rome"}`
	_, base := start(t, Options{Kind: OpenAI, Content: Content{ToolCall: &ToolCall{Name: "get_weather", Arguments: args}}})
	c := openAIClient(base)
	p := responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
	res, err := c.Responses.New(ctxTimeout(t, 10*time.Second), p)
	if err != nil {
		t.Fatal(err)
	}
	if out := res.Output[0]; out.Type != "function_call" || out.Name != "get_weather" || out.Arguments.OfString != args || out.CallID != "call_fake_1" {
		t.Errorf("output %s", out.RawJSON())
	}
	stream := c.Responses.NewStreaming(ctxTimeout(t, 10*time.Second), p)
	var streamed, done string
	for stream.Next() {
		switch ev := stream.Current(); ev.Type {
		case "response.function_call_arguments.delta":
			streamed += ev.Delta
		case "response.function_call_arguments.done":
			done = ev.Arguments
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if streamed != args || done != args {
		t.Errorf("streamed %q done %q", streamed, done)
	}
}

// TestOpenAIEmbeddings: embeddings decode in the SDK, honour dimensions, are deterministic
// per input and unit length, and report the configured prompt tokens.
func TestOpenAIEmbeddings(t *testing.T) {
	s, base := start(t, Options{Kind: OpenAI, Content: Content{PromptTokens: 7}})
	c := openAIClient(base)
	res, err := c.Embeddings.New(ctxTimeout(t, 10*time.Second), openai.EmbeddingNewParams{
		Model:      "text-embedding-3-small",
		Input:      openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"alpha", "beta", "alpha"}},
		Dimensions: openai.Int(16),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 3 || res.Usage.PromptTokens != 7 || res.Usage.TotalTokens != 7 || res.Model != "text-embedding-3-small" {
		t.Fatalf("data=%d usage=%s model=%s", len(res.Data), res.Usage.RawJSON(), res.Model)
	}
	for i, d := range res.Data {
		var norm float64
		for _, v := range d.Embedding {
			norm += v * v
		}
		if d.Index != int64(i) || len(d.Embedding) != 16 || norm < 0.999 || norm > 1.001 {
			t.Errorf("item %d: index=%d len=%d norm=%f", i, d.Index, len(d.Embedding), norm)
		}
	}
	if !equalFloats(res.Data[0].Embedding, res.Data[2].Embedding) || equalFloats(res.Data[0].Embedding, res.Data[1].Embedding) {
		t.Error("same input must embed the same, different inputs differently")
	}
	r, _ := s.LastRequest()
	if r.Path != "/v1/embeddings" || r.Get("dimensions").Int() != 16 {
		t.Errorf("recorded path %s body %s", r.Path, r.Body)
	}
	if _, err := c.Embeddings.New(ctxTimeout(t, 10*time.Second), openai.EmbeddingNewParams{
		Model: "text-embedding-3-small",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")},
	}, option.WithHeader(FaultHeader, "error=rate_limit")); !isStatus(err, http.StatusTooManyRequests) {
		t.Errorf("header fault on embeddings: err = %v", err)
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func isStatus(err error, status int) bool {
	var apiErr *openai.Error
	return errors.As(err, &apiErr) && apiErr.StatusCode == status
}
