package sdktest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	fp "github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/extproc/sse"
	"github.com/switchyard-gw/switchyard/extproc/stream"
)

const testUnified = `{"strategy":"simple-shuffle","deployment":"d1"}`

// upstream runs the fake provider in-process and returns the SSE body it streams for a
// request of dialect d under fault f.
func upstream(t *testing.T, kind fp.Kind, d dialect.Dialect, f fp.Fault, includeUsage bool) []byte {
	t.Helper()
	s, ts := fp.NewTestServer(t, fp.Options{Kind: kind})
	s.Script(f)
	url, req := ts.URL+"/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream":true`
	switch d {
	case dialect.Responses:
		url, req = ts.URL+"/v1/responses", `{"model":"gpt-5","input":"hi","stream":true`
	case dialect.Messages:
		url, req = ts.URL+"/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":256,"messages":[{"role":"user","content":"hi"}],"stream":true`
	}
	if includeUsage {
		req += `,"stream_options":{"include_usage":true}`
	}
	hr, err := http.NewRequestWithContext(sdkCtx(t), http.MethodPost, url, strings.NewReader(req+"}"))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("anthropic-version", "2023-06-01")
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("upstream: status %d, %v: %s", res.StatusCode, err, b)
	}
	return b
}

const sdkRequestID = "req-switchyard-42"

// clientBody is what the attempt role sends the client for an upstream body: every event
// passed on unchanged except the dropped usage chunk, unified_routing on the final event,
// and, when fail is set, the in-band error event at the end (a failure after commit).
func clientBody(t *testing.T, d dialect.Dialect, upstream []byte, fail *stream.ErrorInfo) []byte {
	t.Helper()
	var p sse.Parser
	c := stream.New(d, stream.Options{})
	var out []byte
	committed := false
	emit := func(ev *sse.Event) {
		v := c.Classify(ev)
		committed = committed || v.First
		switch {
		case v.Drop:
		case v.Final && fail == nil:
			out = c.AppendFinal(out, ev, []byte(testUnified))
		default:
			out = append(out, ev.Raw...)
		}
	}
	p.Feed(upstream, emit)
	p.Flush(emit)
	if fail != nil {
		if !committed {
			t.Fatal("the upstream stream did not commit")
		}
		out = c.AppendError(out, *fail, sdkRequestID)
	}
	return out
}

// serve answers every request with body as an event stream.
func serve(t *testing.T, body []byte) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(body)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

func sdkCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openAIAt(url string) openai.Client {
	return openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("k"), option.WithMaxRetries(0))
}

func anthropicAt(url string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(url), aoption.WithAPIKey("k"), aoption.WithMaxRetries(0))
}

var chatParams = openai.ChatCompletionNewParams{
	Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
}

var responsesParams = responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}

var messageParams = anthropic.MessageNewParams{
	Model: "claude-sonnet-4-5", MaxTokens: 256,
	Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
}

// TestSDKsRaiseTheErrorEvent: after two content pieces, the error event of AppendError
// makes each official SDK's streaming iterator stop with an error carrying the request id,
// rather than end as if the answer were complete (behaviour §8.2).
func TestSDKsRaiseTheErrorEvent(t *testing.T) {
	cut := fp.Fault{End: fp.EndCut, EndAfter: 2}
	fail := &stream.ErrorInfo{Type: "server_error", Code: "upstream_stream_truncated", Message: "The upstream stream ended early."}

	t.Run("openai chat", func(t *testing.T) {
		body := clientBody(t, dialect.Chat, upstream(t, fp.OpenAI, dialect.Chat, cut, false), fail)
		c := openAIAt(serve(t, body))
		s := c.Chat.Completions.NewStreaming(sdkCtx(t), chatParams)
		var text string
		for s.Next() {
			for _, ch := range s.Current().Choices {
				text += ch.Delta.Content
			}
		}
		var se *ssestream.StreamError
		if err := s.Err(); !errors.As(err, &se) || !strings.Contains(err.Error(), sdkRequestID) ||
			!strings.Contains(err.Error(), "upstream_stream_truncated") {
			t.Fatalf("stream error %v (%T), want a StreamError naming %s", err, err, sdkRequestID)
		}
		if text == "" || strings.HasSuffix("Hello from the fake provider.", text) {
			t.Fatalf("content before the error %q", text)
		}
	})
	t.Run("openai responses", func(t *testing.T) {
		body := clientBody(t, dialect.Responses, upstream(t, fp.OpenAI, dialect.Responses, cut, false), fail)
		c := openAIAt(serve(t, body))
		s := c.Responses.NewStreaming(sdkCtx(t), responsesParams)
		deltas := 0
		for s.Next() {
			if s.Current().Type == "response.output_text.delta" {
				deltas++
			}
		}
		var se *ssestream.StreamError
		if err := s.Err(); !errors.As(err, &se) || !strings.Contains(err.Error(), sdkRequestID) {
			t.Fatalf("stream error %v (%T), want a StreamError naming %s", err, err, sdkRequestID)
		}
		if deltas != 2 {
			t.Fatalf("%d deltas before the error, want 2", deltas)
		}
	})
	t.Run("anthropic messages", func(t *testing.T) {
		f := *fail
		f.Type = "api_error"
		body := clientBody(t, dialect.Messages, upstream(t, fp.Anthropic, dialect.Messages, cut, false), &f)
		c := anthropicAt(serve(t, body))
		s := c.Messages.NewStreaming(sdkCtx(t), messageParams)
		var msg anthropic.Message
		for s.Next() {
			if err := msg.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		var ae *anthropic.Error
		if err := s.Err(); !errors.As(err, &ae) || !strings.Contains(ae.RawJSON(), sdkRequestID) ||
			!strings.Contains(err.Error(), sdkRequestID) || ae.Type() != "api_error" {
			t.Fatalf("stream error %v (%T), want an *anthropic.Error naming %s", err, err, sdkRequestID)
		}
		if len(msg.Content) != 1 || msg.Content[0].Text == "" {
			t.Fatalf("content before the error %+v", msg.Content)
		}
	})
}

// TestSDKsAcceptUnifiedRouting: the final events rewritten by AppendFinal (and the usage
// chunk dropped) leave a stream the SDKs read to the end without error, whole, with
// unified_routing where behaviour §10.1 puts it.
func TestSDKsAcceptUnifiedRouting(t *testing.T) {
	const text = "Hello from the fake provider."
	t.Run("openai chat", func(t *testing.T) {
		up := upstream(t, fp.OpenAI, dialect.Chat, fp.Fault{}, true)
		c := openAIAt(serve(t, clientBody(t, dialect.Chat, up, nil)))
		s := c.Chat.Completions.NewStreaming(sdkCtx(t), chatParams)
		var acc openai.ChatCompletionAccumulator
		var last string
		for s.Next() {
			if !acc.AddChunk(s.Current()) {
				t.Fatalf("accumulator refused chunk %s", s.Current().RawJSON())
			}
			last = s.Current().RawJSON()
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.Choices[0].Message.Content != text || acc.Choices[0].FinishReason != "stop" || acc.Usage.TotalTokens != 0 {
			t.Fatalf("accumulated %+v (usage must be hidden: %+v)", acc.Choices[0], acc.Usage)
		}
		if gjson.Get(last, "unified_routing").Raw != testUnified {
			t.Fatalf("last chunk %s", last)
		}
	})
	t.Run("openai responses", func(t *testing.T) {
		up := upstream(t, fp.OpenAI, dialect.Responses, fp.Fault{}, false)
		c := openAIAt(serve(t, clientBody(t, dialect.Responses, up, nil)))
		s := c.Responses.NewStreaming(sdkCtx(t), responsesParams)
		var completed responses.Response
		for s.Next() {
			if ev := s.Current(); ev.Type == "response.completed" {
				completed = ev.AsResponseCompleted().Response
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if completed.OutputText() != text || completed.JSON.ExtraFields["unified_routing"].Raw() != testUnified {
			t.Fatalf("completed %q, unified %q", completed.OutputText(), completed.JSON.ExtraFields["unified_routing"].Raw())
		}
	})
	t.Run("anthropic messages", func(t *testing.T) {
		up := upstream(t, fp.Anthropic, dialect.Messages, fp.Fault{}, false)
		c := anthropicAt(serve(t, clientBody(t, dialect.Messages, up, nil)))
		s := c.Messages.NewStreaming(sdkCtx(t), messageParams)
		var msg anthropic.Message
		unified := ""
		for s.Next() {
			ev := s.Current()
			if err := msg.Accumulate(ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type == "message_delta" {
				unified = gjson.Get(ev.RawJSON(), "unified_routing").Raw
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if msg.Content[0].Text != text || msg.StopReason != anthropic.StopReasonEndTurn || msg.Usage.OutputTokens != 4 || unified != testUnified {
			t.Fatalf("message %q %s usage %+v unified %q", msg.Content[0].Text, msg.StopReason, msg.Usage, unified)
		}
	})
}
