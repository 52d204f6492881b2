package stream

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/extproc/sse"
)

// committedStream is a dialect's stream of 200 content events after the commit point, as
// real providers frame them (wire-formats §1.2, §2.1, §3.2).
func committedStream(d dialect.Dialect) (head, body []byte) {
	var h, b bytes.Buffer
	for i := range 200 {
		switch d {
		case dialect.Chat:
			if i == 0 {
				h.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}],"usage":null}` + "\n\n")
			}
			fmt.Fprintf(&b, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" tok\"%d\""},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"pad"}`+"\n\n", i)
		case dialect.Responses:
			if i == 0 {
				h.WriteString("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":3,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\",\"logprobs\":[]}\n\n")
			}
			fmt.Fprintf(&b, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\" tok\\\"%d\\\"\\n\",\"logprobs\":[]}\n\n", i+4, i)
		case dialect.Messages:
			if i == 0 {
				h.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n")
			}
			fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" tok\\u00e9%d\\n\"}}\n\n", i)
		}
	}
	return h.Bytes(), b.Bytes()
}

// misaligned splits b into n chunks that do not line up with the events.
func misaligned(b []byte, n int) [][]byte {
	size := len(b)/n + 3
	var out [][]byte
	for len(b) > 0 {
		k := min(size, len(b))
		out = append(out, b[:k])
		b = b[k:]
	}
	return out
}

var benchDialects = []dialect.Dialect{dialect.Chat, dialect.Responses, dialect.Messages}

// TestClassifyAllocatesNothingPerChunk: parsing and classifying a committed stream's
// chunks allocates nothing (issue 10: "allocate nothing per chunk on the steady-state
// path").
func TestClassifyAllocatesNothingPerChunk(t *testing.T) {
	for _, d := range benchDialects {
		t.Run(d.String(), func(t *testing.T) {
			head, body := committedStream(d)
			chunks := misaligned(body, 200)
			var p sse.Parser
			c := New(d, Options{})
			outputs := 0
			emit := func(ev *sse.Event) {
				if c.Classify(ev).Output {
					outputs++
				}
			}
			p.Feed(head, emit)
			for _, ch := range chunks { // warm the buffers
				p.Feed(ch, emit)
			}
			if !c.committed || outputs != 201 {
				t.Fatalf("committed %v after %d output events, want 201", c.committed, outputs)
			}
			if a := testing.AllocsPerRun(10, func() {
				for _, ch := range chunks {
					p.Feed(ch, emit)
				}
			}); a != 0 {
				t.Fatalf("%v allocations per 200-chunk stream, want 0", a)
			}
		})
	}
}

// BenchmarkParseClassify is the attempt role's per-chunk stream work after commit: SSE
// parsing and frame classification of one body chunk of a 200-chunk stream.
func BenchmarkParseClassify(b *testing.B) {
	for _, d := range benchDialects {
		b.Run(d.String(), func(b *testing.B) {
			head, body := committedStream(d)
			chunks := misaligned(body, 200)
			var p sse.Parser
			c := New(d, Options{})
			emit := func(ev *sse.Event) { c.Classify(ev) }
			p.Feed(head, emit)
			b.SetBytes(int64(len(body) / len(chunks)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				p.Feed(chunks[i%len(chunks)], emit)
			}
		})
	}
}
