package stream

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/extproc/sse"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

func chunk(choices string) string {
	return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":` + choices + "}\n\n"
}

const done = "data: [DONE]\n\n"

// TestCommit: which frames commit a stream (behaviour §8.2), per dialect.
func TestCommit(t *testing.T) {
	tests := []struct {
		name   string
		d      dialect.Dialect
		stream string
		first  int // index of the committing event, -1 none
	}{
		{"chat role-only delta", dialect.Chat, chunk(`[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]`), -1},
		{"chat content", dialect.Chat, chunk(`[{"index":0,"delta":{"role":"assistant","content":""}}]`) + chunk(`[{"index":0,"delta":{"content":"Hi"}}]`), 1},
		{"chat content null", dialect.Chat, chunk(`[{"index":0,"delta":{"content":null}}]`), -1},
		{"chat reasoning_content", dialect.Chat, chunk(`[{"index":0,"delta":{"reasoning_content":"think"}}]`), 0},
		{"chat reasoning", dialect.Chat, chunk(`[{"index":0,"delta":{"reasoning":"think"}}]`), 0},
		{"chat refusal", dialect.Chat, chunk(`[{"index":0,"delta":{"refusal":"no"}}]`), 0},
		{"chat tool_calls", dialect.Chat, chunk(`[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":""}}]}}]`), 0},
		{"chat empty tool_calls", dialect.Chat, chunk(`[{"index":0,"delta":{"tool_calls":[]}}]`), -1},
		{"chat second choice", dialect.Chat, chunk(`[{"index":1,"delta":{"content":"x"}}]`), 0},
		{"chat escaped content", dialect.Chat, chunk(`[{"index":0,"delta":{"content":"\n"}}]`), 0},
		{"chat finish only", dialect.Chat, chunk(`[{"index":0,"delta":{},"finish_reason":"stop"}]`), -1},
		{"chat azure annotation", dialect.Chat, `data: {"id":"","object":"","created":0,"model":"","prompt_filter_results":[{"prompt_index":0}],"choices":[],"usage":null}` + "\n\n", -1},
		{"chat keepalive comments", dialect.Chat, ": keepalive\n\n: OPENROUTER PROCESSING\n\n" + chunk(`[{"index":0,"delta":{"content":"x"}}]`), 0},
		{"chat empty data", dialect.Chat, "data:\n\n" + chunk(`[{"index":0,"delta":{"content":"x"}}]`), 1},
		{"responses created, in_progress, message item", dialect.Responses,
			"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{}}\n\n" +
				"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"message\"}}\n\n" +
				"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n", 2},
		{"responses empty text delta", dialect.Responses, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"\"}\n\n", -1},
		{"responses reasoning summary delta", dialect.Responses, "event: response.reasoning_summary_text.delta\ndata: {\"type\":\"response.reasoning_summary_text.delta\",\"delta\":\"t\"}\n\n", 0},
		{"responses reasoning text delta", dialect.Responses, "event: response.reasoning_text.delta\ndata: {\"type\":\"response.reasoning_text.delta\",\"delta\":\"t\"}\n\n", 0},
		{"responses refusal delta", dialect.Responses, "event: response.refusal.delta\ndata: {\"type\":\"response.refusal.delta\",\"delta\":\"no\"}\n\n", 0},
		{"responses function_call item", dialect.Responses, "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"function_call\",\"name\":\"f\"}}\n\n", 0},
		{"responses arguments delta", dialect.Responses, "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"delta\":\"{\"}\n\n", 0},
		{"responses data-only delta", dialect.Responses, "data: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n", 0},
		{"messages start and ping", dialect.Messages,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n" +
				"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n", 3},
		{"messages tool_use start", dialect.Messages, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\n", 0},
		{"messages server_tool_use start", dialect.Messages, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"t\",\"name\":\"web_search\"}}\n\n", 0},
		{"messages thinking delta", dialect.Messages, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hm\"}}\n\n", 0},
		{"messages empty text delta", dialect.Messages, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\"}}\n\n", -1},
		{"messages message_delta and stop", dialect.Messages, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":0}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := assertSplitsAgree(t, tc.d, Options{}, []byte(tc.stream))
			if r.First != tc.first {
				t.Fatalf("first commit at %d, want %d: %s", r.First, tc.first, r)
			}
		})
	}
}

// TestInBandErrors: in-band error events become Outcomes that routing/failure classifies
// like the equivalent HTTP error (behaviour §8.5).
func TestInBandErrors(t *testing.T) {
	tests := []struct {
		name   string
		d      dialect.Dialect
		p      failure.Provider
		stream string
		event  string
		class  failure.Class
		kind   failure.Kind
		status int
	}{
		{"chat data error", dialect.Chat, failure.ProviderOpenAI,
			`data: {"error":{"message":"The server had an error processing your request.","type":"server_error","param":null,"code":null}}` + "\n\n" + done,
			"", failure.ClassTransient, failure.KindServerError, 500},
		{"chat context overflow", dialect.Chat, failure.ProviderOpenAI,
			`data: {"error":{"message":"maximum context length","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}` + "\n\n",
			"", failure.ClassRequest, failure.KindContextOverflow, 400},
		{"azure rate limit code 429", dialect.Chat, failure.ProviderAzureOpenAI,
			`data: {"error":{"code":"429","message":"Rate limit is exceeded. Please retry after 3 seconds."}}` + "\n\n",
			"", failure.ClassThrottle, failure.KindRateLimit, 429},
		{"openrouter error with choices", dialect.Chat, failure.ProviderOpenAICompatible,
			`data: {"id":"gen-1","object":"chat.completion.chunk","error":{"code":502,"message":"Provider returned error"},"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"error"}]}` + "\n\n",
			"", failure.ClassTransient, failure.KindServerError, 502},
		{"responses nested error", dialect.Responses, failure.ProviderOpenAI,
			"event: error\ndata: {\"type\":\"error\",\"sequence_number\":2,\"error\":{\"type\":\"invalid_request_error\",\"code\":\"context_length_exceeded\",\"message\":\"Your input exceeds the context window of this model.\",\"param\":\"input\"}}\n\n",
			"error", failure.ClassRequest, failure.KindContextOverflow, 400},
		{"responses data-only error", dialect.Responses, failure.ProviderOpenAI,
			"data: {\"type\":\"error\",\"error\":{\"type\":\"service_unavailable_error\",\"code\":\"server_is_overloaded\",\"message\":\"Our servers are currently overloaded.\"}}\n\n",
			"error", failure.ClassTransient, failure.KindOverloaded, 503},
		{"responses flat error", dialect.Responses, failure.ProviderOpenAI,
			"event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"Rate limit reached for gpt-5. Please try again in 1.5s.\",\"param\":null,\"sequence_number\":3}\n\n",
			"error", failure.ClassThrottle, failure.KindRateLimit, 429},
		{"responses failed", dialect.Responses, failure.ProviderOpenAI,
			"event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":7,\"response\":{\"id\":\"resp_1\",\"status\":\"failed\",\"output\":[],\"error\":{\"code\":\"server_is_overloaded\",\"message\":\"Our servers are currently overloaded.\"}}}\n\n",
			"response.failed", failure.ClassTransient, failure.KindOverloaded, 503},
		{"anthropic overloaded", dialect.Messages, failure.ProviderAnthropic,
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
			"error", failure.ClassTransient, failure.KindOverloaded, 529},
		{"anthropic prompt too long", dialect.Messages, failure.ProviderAnthropic,
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: 207791 tokens > 200000 maximum\"}}\n\n",
			"error", failure.ClassRequest, failure.KindContextOverflow, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p sse.Parser
			c := New(tc.d, Options{Provider: tc.p})
			var got []failure.Classification
			var events []string
			p.Feed([]byte(tc.stream), func(ev *sse.Event) {
				if v := c.Classify(ev); v.Error {
					if v.Output || v.First {
						t.Errorf("an error event commits: %+v", v)
					}
					o := c.Outcome(ev)
					if !o.InBand || o.Status != 200 || o.Provider != tc.p {
						t.Errorf("outcome %+v", o)
					}
					events = append(events, o.Event)
					got = append(got, failure.Classify(o, time.Unix(0, 0)))
				}
			})
			if len(got) != 1 {
				t.Fatalf("%d error events, want 1", len(got))
			}
			g := got[0]
			if events[0] != tc.event || g.Class != tc.class || g.Kind != tc.kind || g.Status != tc.status {
				t.Fatalf("event %q class %s kind %s status %d, want %q %s %s %d (%+v)", events[0], g.Class, g.Kind, g.Status,
					tc.event, tc.class, tc.kind, tc.status, g)
			}
			if e := c.End(); e.State != Failed {
				t.Fatalf("end %+v, want failed", e)
			}
		})
	}
}

// TestNotErrors: things that look like errors and are not.
func TestNotErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		d      dialect.Dialect
		stream string
	}{
		{"chat error null", dialect.Chat, `data: {"id":"x","error":null,"choices":[{"index":0,"delta":{"content":"a"}}]}` + "\n\n"},
		{"responses error field inside an item", dialect.Responses, "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"error\":{\"code\":\"x\"}}}\n\n"},
		{"responses error null in created", dialect.Responses, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"error\":null}}\n\n"},
		{"anthropic ping", dialect.Messages, "event: ping\ndata: {\"type\": \"ping\"}\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := feed(tc.d, Options{}, []byte(tc.stream))
			if len(r.Errors) != 0 || r.End.State == Failed {
				t.Fatalf("error reported: %s", r)
			}
		})
	}
}

// TestCompleteness: behaviour §8.4, no stricter than the SDKs.
func TestCompleteness(t *testing.T) {
	content := chunk(`[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]`)
	tool := chunk(`[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}}]`)
	tests := []struct {
		name      string
		d         dialect.Dialect
		stream    string
		state     State
		anomalies []string
		finish    string
	}{
		{"chat complete", dialect.Chat, content + chunk(`[{"index":0,"delta":{},"finish_reason":"stop"}]`) + done, Complete, nil, "stop"},
		{"chat finished, no [DONE]", dialect.Chat, content + chunk(`[{"index":0,"delta":{},"finish_reason":"length"}]`), Complete, []string{AnomalyNoDone}, "length"},
		{"chat [DONE], no finish_reason", dialect.Chat, content + done, Complete, []string{AnomalyInferredStop}, "stop"},
		{"chat [DONE], no finish_reason, tool call", dialect.Chat, tool + done, Complete, []string{AnomalyInferredToolCalls}, "tool_calls"},
		{"chat only [DONE]", dialect.Chat, done, Complete, []string{AnomalyEmpty}, ""},
		{"chat neither", dialect.Chat, content, Truncated, nil, ""},
		{"chat nothing at all", dialect.Chat, "", Truncated, nil, ""},
		{"chat keepalives only", dialect.Chat, ": keepalive\n\n", Truncated, nil, ""},
		{"chat two choices, one unfinished, no [DONE]", dialect.Chat,
			chunk(`[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]`) + chunk(`[{"index":0,"delta":{},"finish_reason":"stop"}]`), Truncated, nil, "stop"},
		{"chat two choices finished, no [DONE]", dialect.Chat,
			chunk(`[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]`) +
				chunk(`[{"index":1,"delta":{},"finish_reason":"stop"}]`) + chunk(`[{"index":0,"delta":{},"finish_reason":"stop"}]`), Complete, []string{AnomalyNoDone}, "stop"},
		{"chat [DONE] unterminated", dialect.Chat, content + "data: [DONE]", Complete, []string{AnomalyInferredStop}, "stop"},
		{"responses completed", dialect.Responses, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"usage\":{\"input_tokens\":1,\"output_tokens\":2,\"total_tokens\":3}}}\n\n", Complete, nil, "completed"},
		{"responses incomplete max_output_tokens", dialect.Responses, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\nevent: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"}}}\n\n", Complete, nil, "max_output_tokens"},
		{"responses cut", dialect.Responses, "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"message\"}}\n\nevent: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n", Truncated, nil, ""},
		{"messages stop without stop_reason", dialect.Messages, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", Complete, []string{AnomalyInferredEndTurn}, "end_turn"},
		{"messages stop without stop_reason, tool use", dialect.Messages, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", Complete, []string{AnomalyInferredToolUse}, "tool_use"},
		{"messages only message_stop", dialect.Messages, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", Complete, []string{AnomalyInferredEndTurn, AnomalyEmpty}, "end_turn"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := assertSplitsAgree(t, tc.d, Options{}, []byte(tc.stream)).End
			if e.State != tc.state || !slices.Equal(e.Anomalies, tc.anomalies) || e.FinishReason != tc.finish {
				t.Fatalf("got %s %q %q, want %s %q %q", e.State, e.Anomalies, e.FinishReason, tc.state, tc.anomalies, tc.finish)
			}
		})
	}
}

// TestUsage: usage across frames and splits (wire-formats §6).
func TestUsage(t *testing.T) {
	tests := []struct {
		name   string
		d      dialect.Dialect
		stream string
		want   Usage
	}{
		{"chat usage chunk", dialect.Chat, chunk(`[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]`) +
			`data: {"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":9,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0}}}` + "\n\n" + done,
			Usage{20, 9, 29, true}},
		{"chat usage null everywhere", dialect.Chat, `data: {"id":"x","choices":[{"index":0,"delta":{"content":"a"}}],"usage":null}` + "\n\n" + done, Usage{}},
		{"responses completed usage", dialect.Responses, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"usage\":{\"input_tokens\":12,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":19,\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":31}}}\n\n",
			Usage{12, 19, 31, true}},
		{"anthropic start then cumulative delta", dialect.Messages,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":11,\"cache_creation_input_tokens\":2,\"cache_read_input_tokens\":5,\"output_tokens\":1}}}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":6}}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\n",
			Usage{18, 9, 27, true}},
		{"anthropic input only in message_delta (compatible gateways)", dialect.Messages,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":0,\"output_tokens\":0}}}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"input_tokens\":40,\"output_tokens\":6}}\n\n",
			Usage{40, 6, 46, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := assertSplitsAgree(t, tc.d, Options{}, []byte(tc.stream)).End.Usage; got != tc.want {
				t.Fatalf("usage %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestHiddenUsageChunk: the usage chunk is dropped only when the client did not ask for
// usage, and only the usage chunk (not Azure's annotation chunk, which also has no choices).
func TestHiddenUsageChunk(t *testing.T) {
	annotation := `data: {"id":"","object":"","created":0,"model":"","prompt_filter_results":[],"choices":[],"usage":null}` + "\n\n"
	usageChunk := `data: {"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3}}` + "\n\n"
	stream := annotation + chunk(`[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]`) + usageChunk + done
	for _, tc := range []struct {
		clientUsage bool
		dropped     int
	}{{false, 1}, {true, 0}} {
		r := feed(dialect.Chat, Options{ClientUsage: tc.clientUsage}, []byte(stream))
		if len(r.Dropped) != tc.dropped || (tc.dropped == 1 && !strings.Contains(r.Dropped[0], `"usage":{"prompt_tokens":2`)) {
			t.Fatalf("client usage %v: dropped %q", tc.clientUsage, r.Dropped)
		}
		if r.End.Usage != (Usage{2, 1, 3, true}) {
			t.Fatalf("usage %+v", r.End.Usage)
		}
	}
	// Rebuilding the body without the dropped event gives the stream minus that chunk.
	var p sse.Parser
	c := New(dialect.Chat, Options{})
	var out []byte
	p.Feed([]byte(stream), func(ev *sse.Event) {
		if !c.Classify(ev).Drop {
			out = append(out, ev.Raw...)
		}
	})
	if want := strings.Replace(stream, usageChunk, "", 1); string(out) != want {
		t.Fatalf("client body\n%s\nwant\n%s", out, want)
	}
}

// TestAppendFinal: unified_routing goes where behaviour §10.1 says, and the result is still a
// valid event of the stream.
func TestAppendFinal(t *testing.T) {
	tests := []struct {
		name   string
		d      dialect.Dialect
		stream string
		path   string // where unified_routing must be in the rewritten event's data
		events int    // events in AppendFinal's output
	}{
		{"chat before [DONE]", dialect.Chat, chunk(`[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]`) + done, "unified_routing", 2},
		{"anthropic message_delta", dialect.Messages, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":6}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", "unified_routing", 1},
		{"anthropic message_stop without message_delta", dialect.Messages, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", "unified_routing", 1},
		{"responses completed", dialect.Responses, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\"}}\n\n", "response.unified_routing", 1},
		{"responses completed, multi-line data", dialect.Responses, "event: response.completed\ndata: {\"type\":\"response.completed\",\ndata: \"response\":{\"id\":\"r\"}}\n\n", "response.unified_routing", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := feed(tc.d, Options{}, []byte(tc.stream))
			if len(r.Final) != 1 {
				t.Fatalf("%d final events, want 1: %s", len(r.Final), r)
			}
			var p sse.Parser
			var evs []string
			var names []string
			p.Feed([]byte(r.Final[0]), func(ev *sse.Event) {
				if ev.Kind == sse.KindEvent {
					evs = append(evs, string(ev.Data))
					names = append(names, string(ev.Name))
				}
			})
			if len(evs) != tc.events {
				t.Fatalf("rewritten into %d events, want %d: %q", len(evs), tc.events, r.Final[0])
			}
			if got := gjson.Get(evs[0], tc.path).Raw; got != testUnified {
				t.Fatalf("%s = %s in %s", tc.path, got, evs[0])
			}
			if tc.d == dialect.Chat {
				if evs[1] != "[DONE]" || gjson.Get(evs[0], "id").Str != "chatcmpl-1" || gjson.Get(evs[0], "choices").Raw != "[]" {
					t.Fatalf("chat final %q", r.Final[0])
				}
			} else if names[0] == "" || gjson.Get(evs[0], "type").Str != names[0] {
				t.Fatalf("event name %q lost: %q", names[0], r.Final[0])
			}
		})
	}
	// Chat finished without [DONE]: the caller appends the chunk at the end.
	c := New(dialect.Chat, Options{})
	var p sse.Parser
	p.Feed([]byte(chunk(`[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]`)), func(ev *sse.Event) { c.Classify(ev) })
	if got := string(c.AppendFinal(nil, nil, []byte(testUnified))); got != `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"unified_routing":`+testUnified+"}\n\n" {
		t.Fatalf("end chunk %q", got)
	}
}

// TestAppendError: the error events' shapes, and that routing/failure reads them back.
func TestAppendError(t *testing.T) {
	e := ErrorInfo{Type: "server_error", Code: "upstream_stream_truncated", Message: "The upstream stream was cut off."}
	tests := []struct {
		d    dialect.Dialect
		want string
	}{
		{dialect.Chat, `data: {"error":{"message":"The upstream stream was cut off. (request id: req-1)","type":"server_error","param":null,"code":"upstream_stream_truncated"}}` + "\n\n" + done},
		{dialect.Responses, "event: error\ndata: {\"type\":\"error\",\"sequence_number\":8,\"code\":\"upstream_stream_truncated\",\"message\":\"The upstream stream was cut off. (request id: req-1)\",\"param\":null,\"error\":{\"message\":\"The upstream stream was cut off. (request id: req-1)\",\"type\":\"server_error\",\"param\":null,\"code\":\"upstream_stream_truncated\"}}\n\n"},
		{dialect.Messages, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"The upstream stream was cut off.\"},\"request_id\":\"req-1\"}\n\n"},
	}
	for _, tc := range tests {
		t.Run(tc.d.String(), func(t *testing.T) {
			c := New(tc.d, Options{})
			if tc.d == dialect.Responses {
				var p sse.Parser
				p.Feed([]byte("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":7,\"delta\":\"a\"}\n\n"), func(ev *sse.Event) { c.Classify(ev) })
			}
			ei := e
			if tc.d == dialect.Messages {
				ei.Type = "api_error"
			}
			got := string(c.AppendError(nil, ei, "req-1"))
			if got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
			// The event reads back as an in-band error of a 500.
			r := feed(tc.d, Options{}, []byte(got))
			if len(r.Errors) != 1 {
				t.Fatalf("not an in-band error: %s", r)
			}
		})
	}
}
