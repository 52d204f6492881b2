package sse

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// rec is an Event copied out of the parser's buffers.
type rec struct {
	Kind         Kind
	Name, Data   string
	Raw          string
	Comments     int
	Unterminated bool
}

func (r rec) String() string {
	return fmt.Sprintf("{%d %q %q raw=%q c=%d u=%v}", r.Kind, r.Name, r.Data, r.Raw, r.Comments, r.Unterminated)
}

// parseChunks feeds chunks in order, then flushes, and returns every block.
func parseChunks(p *Parser, chunks ...[]byte) []rec {
	var out []rec
	emit := func(e *Event) {
		out = append(out, rec{e.Kind, string(e.Name), string(e.Data), string(e.Raw), e.Comments, e.Unterminated})
	}
	for _, c := range chunks {
		p.Feed(c, emit)
	}
	p.Flush(emit)
	return out
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []rec
	}{
		{"data-only LF", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []rec{
			{KindEvent, "", `{"a":1}`, "data: {\"a\":1}\n\n", 0, false},
			{KindEvent, "", "[DONE]", "data: [DONE]\n\n", 0, false},
		}},
		{"named CRLF", "event: ping\r\ndata: {}\r\n\r\n", []rec{
			{KindEvent, "ping", "{}", "event: ping\r\ndata: {}\r\n\r\n", 0, false},
		}},
		{"CR only", "event: x\rdata: 1\r\rdata: 2\r\r", []rec{
			{KindEvent, "x", "1", "event: x\rdata: 1\r\r", 0, false},
			{KindEvent, "", "2", "data: 2\r\r", 0, false},
		}},
		{"multi-line data joins with LF", "data: a\ndata:b\ndata:  c\n\n", []rec{
			{KindEvent, "", "a\nb\n c", "data: a\ndata:b\ndata:  c\n\n", 0, false},
		}},
		{"comment is keepalive, not an event", ": keepalive\n\ndata: x\n\n", []rec{
			{KindComment, "", "", ": keepalive\n\n", 1, false},
			{KindEvent, "", "x", "data: x\n\n", 0, false},
		}},
		{"comment inside an event", "event: e\n: note\ndata: x\n\n", []rec{
			{KindEvent, "e", "x", "event: e\n: note\ndata: x\n\n", 1, false},
		}},
		{"id and retry ignored; no data is not dispatched", "id: 7\nretry: 10\n\nid: 8\ndata: y\n\n", []rec{
			{KindEmpty, "", "", "id: 7\nretry: 10\n\n", 0, false},
			{KindEvent, "", "y", "id: 8\ndata: y\n\n", 0, false},
		}},
		{"stray blank lines", "\n\ndata: x\n\n\n", []rec{
			{KindEmpty, "", "", "\n", 0, false},
			{KindEmpty, "", "", "\n", 0, false},
			{KindEvent, "", "x", "data: x\n\n", 0, false},
			{KindEmpty, "", "", "\n", 0, false},
		}},
		{"final event without blank line", "data: a\n\ndata: [DONE]", []rec{
			{KindEvent, "", "a", "data: a\n\n", 0, false},
			{KindEvent, "", "[DONE]", "data: [DONE]", 0, true},
		}},
		{"final event ended by one LF", "data: [DONE]\n", []rec{
			{KindEvent, "", "[DONE]", "data: [DONE]\n", 0, true},
		}},
		{"field without colon", "data\n\n", []rec{{KindEvent, "", "", "data\n\n", 0, false}}},
		{"empty data value", "data:\n\n", []rec{{KindEvent, "", "", "data:\n\n", 0, false}}},
		{"last event line wins", "event: a\nevent: b\ndata: 1\n\n", []rec{
			{KindEvent, "b", "1", "event: a\nevent: b\ndata: 1\n\n", 0, false},
		}},
		{"leading BOM skipped", "\xEF\xBB\xBFdata: x\n\n", []rec{
			{KindEvent, "", "x", "\xEF\xBB\xBFdata: x\n\n", 0, false},
		}},
		{"unknown field ignored", "foo: bar\ndata: x\n\n", []rec{
			{KindEvent, "", "x", "foo: bar\ndata: x\n\n", 0, false},
		}},
		{"empty stream", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p Parser
			got := parseChunks(&p, []byte(tc.in))
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got  %v\nwant %v", got, tc.want)
			}
			assertSplitInvariant(t, []byte(tc.in))
		})
	}
}

// assertSplitInvariant checks that splitting in at every byte into two chunks, and feeding it
// one byte at a time, gives the same blocks as one feed, and that the blocks' Raw bytes
// concatenate to the input.
func assertSplitInvariant(t *testing.T, in []byte) {
	t.Helper()
	var p Parser
	whole := parseChunks(&p, in)
	var raw strings.Builder
	for _, r := range whole {
		raw.WriteString(r.Raw)
	}
	if raw.String() != string(in) {
		t.Fatalf("raw spans do not cover the input:\n got %q\nwant %q", raw.String(), in)
	}
	want := fmt.Sprint(whole)
	for i := 0; i <= len(in); i++ {
		if got := fmt.Sprint(parseChunks(&p, in[:i], in[i:])); got != want {
			t.Fatalf("split at %d:\n got %v\nwant %v", i, got, want)
		}
	}
	bytewise := make([][]byte, len(in))
	for i := range in {
		bytewise[i] = in[i : i+1]
	}
	if got := fmt.Sprint(parseChunks(&p, bytewise...)); got != want {
		t.Fatalf("byte by byte:\n got %v\nwant %v", got, want)
	}
}

// TestCRLFSplitAtCR: a blank line's CR at the end of a chunk and its LF in the next must
// not become two line ends (which would end the next block early) nor change Raw.
func TestCRLFSplitAtCR(t *testing.T) {
	var p Parser
	got := parseChunks(&p, []byte("data: a\r\n\r"), []byte("\ndata: b\r\n\r\n"))
	want := []rec{
		{KindEvent, "", "a", "data: a\r\n\r\n", 0, false},
		{KindEvent, "", "b", "data: b\r\n\r\n", 0, false},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}

// TestHoldsOnlyIncompleteEvent: between chunks the parser keeps only the bytes of the
// incomplete block, never the stream.
func TestHoldsOnlyIncompleteEvent(t *testing.T) {
	var p Parser
	n := 0
	emit := func(*Event) { n++ }
	for range 100 {
		p.Feed([]byte("data: {\"x\":1}\n\ndata: {\"y\""), emit)
		if p.Pending() != len("data: {\"y\"") {
			t.Fatalf("pending %d bytes, want %d", p.Pending(), len("data: {\"y\""))
		}
		p.Feed([]byte(":2}\n\n"), emit)
		if p.Pending() != 0 {
			t.Fatalf("pending %d bytes after a complete event", p.Pending())
		}
	}
	if n != 200 {
		t.Fatalf("%d events, want 200", n)
	}
}

// TestRawValidUntilNextFeed: an event joined across chunks keeps its bytes while the next
// incomplete block is stored.
func TestRawValidUntilNextFeed(t *testing.T) {
	var p Parser
	var kept [][]byte
	p.Feed([]byte("data: fir"), func(*Event) {})
	p.Feed([]byte("st\n\ndata: sec"), func(e *Event) { kept = append(kept, e.Raw, e.Data) })
	if string(kept[0]) != "data: first\n\n" || string(kept[1]) != "first" {
		t.Fatalf("joined event overwritten: %q %q", kept[0], kept[1])
	}
}

// streamOf200 is a Chat Completions stream of 200 content chunks, the benchmark's input.
func streamOf200() []byte {
	var b bytes.Buffer
	for i := range 200 {
		fmt.Fprintf(&b, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok%d \"},\"finish_reason\":null}]}\n\n", i)
	}
	return b.Bytes()
}

// chunksOf splits b into n chunks that do not align with events.
func chunksOf(b []byte, n int) [][]byte {
	size := len(b)/n + 7
	var out [][]byte
	for len(b) > 0 {
		k := min(size, len(b))
		out = append(out, b[:k])
		b = b[k:]
	}
	return out
}

func TestFeedAllocatesNothingPerChunk(t *testing.T) {
	chunks := chunksOf(streamOf200(), 200)
	var p Parser
	events := 0
	emit := func(*Event) { events++ }
	for _, c := range chunks { // warm the buffers
		p.Feed(c, emit)
	}
	allocs := testing.AllocsPerRun(20, func() {
		for _, c := range chunks {
			p.Feed(c, emit)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per 200-chunk stream, want 0", allocs)
	}
	if events != 22*200 { // the warm-up, AllocsPerRun's own warm-up, 20 runs
		t.Fatalf("%d events, want %d", events, 22*200)
	}
}

func BenchmarkFeed(b *testing.B) {
	stream := streamOf200()
	chunks := chunksOf(stream, 200)
	var p Parser
	n := 0
	emit := func(*Event) { n++ }
	b.SetBytes(int64(len(stream)) / int64(len(chunks)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p.Feed(chunks[i%len(chunks)], emit)
	}
}
