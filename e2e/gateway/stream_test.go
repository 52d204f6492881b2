package gateway_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
)

// streamChat streams a chat completion with openai-go and returns the accumulated text.
func (g *gateway) streamChat(t *testing.T, opts ...option.RequestOption) (string, error) {
	t.Helper()
	p := chat("gpt-4o")
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := g.openai(opts...).Chat.Completions.NewStreaming(ctxT(t), p)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if len(acc.Choices) == 0 {
		return "", s.Err()
	}
	return acc.Choices[0].Message.Content, s.Err()
}

const fullText = "Hello from the fake provider."

func TestStreamSucceeds(t *testing.T) { forModes(t, testStreamSucceeds) }

func testStreamSucceeds(t *testing.T, xdsMode bool) {
	g := startGateway(t, []deployment{{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI}}, gatewayOptions{xds: xdsMode})
	text, err := g.streamChat(t)
	if err != nil || text != fullText {
		t.Fatalf("text %q err %v", text, err)
	}
	r, _ := g.fakes["oa"].LastRequest()
	if !r.Stream || !r.Get("stream_options.include_usage").Bool() {
		t.Errorf("provider request %s", r.Body)
	}
	eventually(t, "in-flight back to 0", func() bool { return g.inFlight("oa") == 0 })
}

func TestStreamRoleOnlyThenResetFailsOverInFull(t *testing.T) {
	g := startGateway(t, twoDeployments(deployment{}), gatewayOptions{settings: priceBased()})
	text, err := g.streamChat(t, option.WithHeader(fakeprovider.FaultHeader, "server=a; end=reset; after=0"))
	if err != nil || text != fullText {
		t.Fatalf("text %q err %v", text, err)
	}
	if got := g.served(); got["a"] != 1 || got["b"] != 1 {
		t.Errorf("served %v", got)
	}
}

func TestStreamInBandErrorBeforeContentFailsOver(t *testing.T) {
	g := startGateway(t, twoDeployments(deployment{}), gatewayOptions{settings: priceBased()})
	text, err := g.streamChat(t, option.WithHeader(fakeprovider.FaultHeader, "server=a; end=error; after=0; error=overloaded"))
	if err != nil || text != fullText {
		t.Fatalf("text %q err %v", text, err)
	}
	if got := g.served(); got["a"] != 1 || got["b"] != 1 {
		t.Errorf("served %v", got)
	}
}

func TestStreamKeepalivesDoNotCommit(t *testing.T) {
	g := startGateway(t, twoDeployments(deployment{}), gatewayOptions{settings: priceBased()})
	text, err := g.streamChat(t, option.WithHeader(fakeprovider.FaultHeader,
		"server=a; stall=300ms; stall-after=0; keepalive=50ms; end=error; after=0"))
	if err != nil || text != fullText {
		t.Fatalf("keepalives committed the stream: text %q err %v", text, err)
	}
	if got := g.served(); got["b"] != 1 {
		t.Errorf("served %v", got)
	}
}

func TestStreamFailureAfterContentIsAnErrorWithTheRequestID(t *testing.T) {
	g := startGateway(t, twoDeployments(deployment{}), gatewayOptions{settings: priceBased()})
	text, err := g.streamChat(t, option.WithHeader(fakeprovider.FaultHeader, "server=a; end=cut; after=2"))
	if err == nil {
		t.Fatalf("a cut stream returned cleanly: %q", text)
	}
	if !strings.Contains(err.Error(), "upstream_stream_truncated") || !strings.Contains(err.Error(), "req") {
		t.Errorf("error %v, want upstream_stream_truncated with the request id", err)
	}
	if !strings.HasPrefix(fullText, text) || text == fullText {
		t.Errorf("text %q, want a proper prefix of one model's output", text)
	}
	if got := g.served(); got["b"] != 0 {
		t.Errorf("retried after commit: served %v", got)
	}
	eventually(t, "in-flight back to 0", func() bool { return g.inFlight("a", "b") == 0 })
}

func TestStreamInBandErrorAfterContent(t *testing.T) {
	g := startGateway(t, twoDeployments(deployment{}), gatewayOptions{settings: priceBased()})
	_, err := g.streamChat(t, option.WithHeader(fakeprovider.FaultHeader, "server=a; end=error; after=2; message=model exploded"))
	if err == nil || !strings.Contains(err.Error(), "model exploded") {
		t.Fatalf("err %v, want the provider's error", err)
	}
	if got := g.served(); got["b"] != 0 {
		t.Errorf("retried after commit: served %v", got)
	}
}

func TestStreamStallIsAnErrorAfterIdleMs(t *testing.T) {
	g := startGateway(t, []deployment{{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI, IdleMs: 400}}, gatewayOptions{})
	text, err := g.streamChat(t, option.WithHeader(fakeprovider.FaultHeader, "stall=10s; stall-after=2"))
	if err == nil || !strings.Contains(err.Error(), "upstream_stream_idle") {
		t.Fatalf("err %v, want the idle error event", err)
	}
	if text == "" || !strings.HasPrefix(fullText, text) || text == fullText {
		t.Errorf("text before the error %q, want a proper prefix of %q sent once", text, fullText)
	}
}

func TestStreamWithoutDoneIsComplete(t *testing.T) {
	g := startGateway(t, []deployment{{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI}}, gatewayOptions{})
	text, err := g.streamChat(t, option.WithHeader(fakeprovider.FaultHeader, "end=nodone"))
	if err != nil || text != fullText {
		t.Fatalf("text %q err %v", text, err)
	}
	eventually(t, "the anomaly record", func() bool { return strings.Contains(g.logs.String(), "no [DONE]") })
}

func TestStreamUnifiedRoutingOnTheLastChunk(t *testing.T) {
	g := startGateway(t, twoDeployments(deployment{}), gatewayOptions{settings: priceBased()})
	p := chat("gpt-4o")
	s := g.openai(option.WithHeader("x-unified-routing-metadata", "true"), option.WithHeader(fakeprovider.FaultHeader, "server=a; status=500")).
		Chat.Completions.NewStreaming(ctxT(t), p)
	var last string
	for s.Next() {
		if raw := s.Current().RawJSON(); strings.Contains(raw, "unified_routing") {
			last = raw
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(last, `"deployment":"b"`) || !strings.Contains(last, `"move":"failover"`) {
		t.Errorf("unified_routing chunk %s", last)
	}
}

func TestStreamResponsesAndAnthropic(t *testing.T) {
	g := startGateway(t, []deployment{
		{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI},
		{ID: "an", Model: "claude", ProviderModel: "claude-sonnet-4-5", Kind: fakeprovider.Anthropic},
	}, gatewayOptions{})
	rs := g.openai().Responses.NewStreaming(ctxT(t), responses.ResponseNewParams{Model: "gpt-4o",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var text strings.Builder
	for rs.Next() {
		if ev := rs.Current(); ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
	}
	if err := rs.Err(); err != nil || text.String() != fullText {
		t.Fatalf("responses text %q err %v", text.String(), err)
	}
	ms := g.anthropic().Messages.NewStreaming(ctxT(t), anthropic.MessageNewParams{Model: "claude", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var msg anthropic.Message
	for ms.Next() {
		if err := msg.Accumulate(ms.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := ms.Err(); err != nil || len(msg.Content) == 0 || msg.Content[0].Text != fullText {
		t.Fatalf("anthropic %+v err %v", msg.Content, err)
	}
	// An in-band error after content reaches the Anthropic SDK as an error.
	ms = g.anthropic(anthropicHeader(fakeprovider.FaultHeader, "end=error; after=2")).Messages.NewStreaming(ctxT(t),
		anthropic.MessageNewParams{Model: "claude", MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	for ms.Next() {
	}
	var aErr *anthropic.Error
	if err := ms.Err(); err == nil || (!errors.As(err, &aErr) && !strings.Contains(err.Error(), "error")) {
		t.Errorf("anthropic stream err %v", err)
	}
}

func anthropicHeader(k, v string) anthropicoption.RequestOption {
	return anthropicoption.WithHeader(k, v)
}

// TestStreamMessageStopWithoutStopReason: an Anthropic stream that reaches message_stop with
// no stop_reason is complete (behaviour §8.4: the reason is inferred), not a failure.
func TestStreamMessageStopWithoutStopReason(t *testing.T) {
	events := []string{
		`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}`,
		`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello there."}}`,
		`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
		`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_sequence":null},"usage":{"output_tokens":3}}`,
		`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
	}
	srv := newLoopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			_, _ = io.WriteString(w, e+"\n\n")
			w.(http.Flusher).Flush()
		}
	}))
	g := startGateway(t, []deployment{{ID: "an", Model: "claude", ProviderModel: "claude-sonnet-4-5", Kind: fakeprovider.Anthropic, URL: srv}}, gatewayOptions{})
	ms := g.anthropic().Messages.NewStreaming(ctxT(t), anthropic.MessageNewParams{Model: "claude", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var msg anthropic.Message
	for ms.Next() {
		if err := msg.Accumulate(ms.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := ms.Err(); err != nil || len(msg.Content) == 0 || msg.Content[0].Text != "Hello there." {
		t.Fatalf("content %+v err %v", msg.Content, err)
	}
	eventually(t, "the inferred stop reason", func() bool {
		return strings.Contains(g.logs.String(), "inferred end_turn") && strings.Contains(g.logs.String(), `"finish_reason":"end_turn"`)
	})
}

// TestStreamUsageChunkOnlyWhenAsked: switchyard asks every Chat stream for its usage (TPM,
// throughput) and removes the usage-only chunk again when the client did not ask for it.
func TestStreamUsageChunkOnlyWhenAsked(t *testing.T) {
	g := startGateway(t, []deployment{{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI}}, gatewayOptions{})
	for _, tc := range []struct {
		body      string
		wantUsage bool
	}{
		{`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`, false},
		{`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, true},
	} {
		resp, body := g.post("/v1/chat/completions", tc.body, nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "data: [DONE]") {
			t.Fatalf("status %d body %s", resp.StatusCode, body)
		}
		if got := strings.Contains(string(body), `"usage":{`); got != tc.wantUsage {
			t.Errorf("usage chunk present = %v, want %v:\n%s", got, tc.wantUsage, body)
		}
		r, _ := g.fakes["oa"].LastRequest()
		if !r.Get("stream_options.include_usage").Bool() {
			t.Errorf("the provider was not asked for usage: %s", r.Body)
		}
	}
	eventually(t, "completion tokens recorded", func() bool { return strings.Contains(g.logs.String(), `"completion_tokens":4`) })
}
