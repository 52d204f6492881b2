package stream

import (
	"strings"
	"testing"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/extproc/sse"
)

// rewritten feeds stream through a classifier naming model and returns what the client gets:
// every event through AppendEvent, a Final one through AppendFinal.
func rewritten(d dialect.Dialect, model, stream string) string {
	var p sse.Parser
	c := New(d, Options{Model: model})
	var out []byte
	emit := func(ev *sse.Event) {
		v := c.Classify(ev)
		if v.Final {
			out = c.AppendFinal(out, ev, []byte(testUnified))
			return
		}
		out = c.AppendEvent(out, ev)
	}
	// Two chunks split inside an event, so that Raw and Data come from the parser's buffers.
	half := len(stream) / 2
	p.Feed([]byte(stream[:half]), emit)
	p.Feed([]byte(stream[half:]), emit)
	p.Flush(emit)
	return string(out)
}

func TestStreamsNameThePublicModel(t *testing.T) {
	cases := []struct {
		name   string
		d      dialect.Dialect
		stream string
		want   []string // substrings of the client's stream
	}{
		{"chat chunks", dialect.Chat,
			"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n" +
				"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
				"data: [DONE]\n\n",
			[]string{`"model":"public-gpt","choices":[{"index":0,"delta":{"content":"hi"}}]`, `"unified_routing"`}},
		{"chat event on two data lines", dialect.Chat,
			"data: {\"id\":\"c1\",\"model\":\"gpt-4o-2024-08-06\",\ndata: \"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n",
			[]string{`"model":"public-gpt"`}},
		{"anthropic message_start", dialect.Messages,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-20250514\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
			[]string{`"model":"public-gpt","content":[]`, `"text":"hi"`}},
		{"responses created and completed", dialect.Responses,
			"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\",\"model\":\"gpt-4o-2024-08-06\",\"status\":\"in_progress\"}}\n\n" +
				"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n" +
				"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r1\",\"model\":\"gpt-4o-2024-08-06\",\"status\":\"completed\"}}\n\n",
			[]string{`{"id":"r1","model":"public-gpt","status":"in_progress"}`, `"model":"public-gpt","status":"completed","unified_routing"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := rewritten(tc.d, "public-gpt", tc.stream)
			if strings.Contains(got, "gpt-4o-2024-08-06") || strings.Contains(got, "claude-sonnet") {
				t.Fatalf("the provider's model passed:\n%s", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Fatalf("missing %q in:\n%s", w, got)
				}
			}
		})
	}
	// Without a public model the events go out as received.
	in := "data: {\"id\":\"c1\",\"model\":\"gpt-4o-2024-08-06\",\"choices\":[]}\n\n"
	if got := rewritten(dialect.Chat, "", in); got != in {
		t.Fatalf("unchanged stream became %q", got)
	}
}

// Naming the public model in a one-line event splices it into the event as received: no
// copy of the data and no rebuilt event, so a streamed chunk costs no allocation (the
// parser clips Data's capacity, which once hid where it sits in Raw).
func TestModelSpliceAllocatesNothing(t *testing.T) {
	chunk := []byte(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}` + "\n\n")
	c := New(dialect.Chat, Options{Model: "gpt-4o"})
	var p sse.Parser
	out := make([]byte, 0, 1024)
	var got string
	allocs := testing.AllocsPerRun(100, func() {
		out = out[:0]
		p.Feed(chunk, func(ev *sse.Event) {
			c.Classify(ev)
			out = c.AppendEvent(out, ev)
		})
	})
	got = string(out)
	if want := strings.Replace(string(chunk), `"gpt-4o-2024-08-06"`, `"gpt-4o"`, 1); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per chunk, want 0", allocs)
	}
}
