package sse

import (
	"bytes"
	"fmt"
	"testing"
)

// reference is a direct transcription of the WHATWG event-stream algorithm over the whole
// input (the one the SDKs implement, wire-formats §7), except that, like Flush, it also
// dispatches a final event left without its blank line.
func reference(in []byte) []rec {
	in = bytes.TrimPrefix(in, bom)
	var out []rec
	var name, data []byte
	hasData := false
	dispatch := func() {
		if hasData {
			out = append(out, rec{Kind: KindEvent, Name: string(name), Data: string(data)})
		}
		name, data, hasData = nil, nil, false
	}
	for len(in) > 0 {
		line, rest := cutLine(in)
		in = rest
		if len(line) == 0 {
			dispatch()
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if c := bytes.IndexByte(line, ':'); c >= 0 {
			field, value = line[:c], bytes.TrimPrefix(line[c+1:], []byte(" "))
		}
		switch string(field) {
		case "event":
			name = value
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			hasData = true
		}
	}
	dispatch()
	return out
}

func eventsOnly(rs []rec) []rec {
	var out []rec
	for _, r := range rs {
		if r.Kind == KindEvent {
			out = append(out, rec{Kind: KindEvent, Name: r.Name, Data: r.Data})
		}
	}
	return out
}

// FuzzSSE checks, on any input split anywhere into three chunks, that the parser finds the
// reference algorithm's events, that its blocks' Raw bytes reproduce the input, and that
// the split does not change anything.
func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"data: {\"a\":1}\n\ndata: [DONE]\n\n",
		"event: ping\r\ndata: {}\r\n\r\n: keepalive\r\n\r\n",
		"event: x\rdata: 1\r\rdata: 2\r\r",
		"data: a\ndata:b\n\n\n\ndata: tail",
		"\xEF\xBB\xBFid: 1\nretry: 5\ndata\n\n",
	} {
		f.Add([]byte(s), uint16(3), uint16(9))
	}
	f.Fuzz(func(t *testing.T, in []byte, a, b uint16) {
		i, j := int(a)%(len(in)+1), int(b)%(len(in)+1)
		if i > j {
			i, j = j, i
		}
		var p Parser
		whole := parseChunks(&p, in)
		var raw bytes.Buffer
		for _, r := range whole {
			raw.WriteString(r.Raw)
		}
		if !bytes.Equal(raw.Bytes(), in) {
			t.Fatalf("raw spans %q do not reproduce the input %q", raw.Bytes(), in)
		}
		if got, want := fmt.Sprint(eventsOnly(whole)), fmt.Sprint(reference(in)); got != want {
			t.Fatalf("events %s, reference %s", got, want)
		}
		if got, want := fmt.Sprint(parseChunks(&p, in[:i], in[i:j], in[j:])), fmt.Sprint(whole); got != want {
			t.Fatalf("split at %d,%d: %s, unsplit %s", i, j, got, want)
		}
	})
}
