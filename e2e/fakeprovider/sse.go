package fakeprovider

import (
	"bytes"
	"net/http"
)

// sseEvent is one server-sent event. A named event gets an "event:" line (Responses and
// Anthropic, wire-formats §2.1, §3.2); Chat is data-only (§1.2).
type sseEvent struct {
	name string
	data []byte
}

func event(name string, data []byte) sseEvent { return sseEvent{name: name, data: data} }

func data(d []byte) sseEvent { return sseEvent{data: d} }

// encode frames the event; multi-line data becomes several "data:" lines, which the
// client joins with "\n" (wire-formats §7).
func (e sseEvent) encode(buf *bytes.Buffer) {
	if e.name != "" {
		buf.WriteString("event: ")
		buf.WriteString(e.name)
		buf.WriteByte('\n')
	}
	for line := range bytes.SplitSeq(e.data, []byte("\n")) {
		buf.WriteString("data: ")
		buf.Write(bytes.TrimSuffix(line, []byte("\r")))
		buf.WriteByte('\n')
	}
	buf.WriteByte('\n')
}

// streamer produces one dialect's events; the exchange decides when each part is sent.
type streamer interface {
	// head is the opening events, before any content piece.
	head() []sseEvent
	// piece is content piece i.
	piece(i int, p string) []sseEvent
	// tail closes the content (finish reason, usage) and, if terminal, adds the terminal
	// marker.
	tail(o outcome, sent []string, terminal bool) []sseEvent
	// inband is the in-band error; failed asks for Responses' response.failed; raw means
	// e.body is the fault's verbatim Body.
	inband(e apiError, failed, raw bool) []sseEvent
}

// stream answers with SSE, applying the stream faults: FirstByteDelay, Stall (with
// Keepalive), early ends after EndAfter pieces, and EndNoDone.
func (x *exchange) stream(st streamer, pieces []string, o outcome) {
	f := x.f()
	h := x.w.Header()
	x.commonHeaders(h)
	x.faultHeaders(h)
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	x.writeHeader(http.StatusOK)
	if x.flush() != nil {
		return
	}
	if f.FirstByteDelay > 0 && x.pause(f.FirstByteDelay, true) != nil {
		return
	}
	if x.emit(st.head()) != nil {
		return
	}
	stallAt, endAt := min(f.StallAfter, len(pieces)), min(f.EndAfter, len(pieces))
	for i := 0; ; i++ {
		if f.Stall > 0 && i == stallAt && x.pause(f.Stall, true) != nil {
			return
		}
		if f.End.earlyEnd() && i == endAt {
			x.endEarly(st, pieces[:i])
			return
		}
		if i == len(pieces) {
			break
		}
		if x.emit(st.piece(i, pieces[i])) != nil {
			return
		}
	}
	_ = x.emit(st.tail(o, pieces, f.End != EndNoDone))
}

func (x *exchange) endEarly(st streamer, sent []string) {
	f := x.f()
	switch f.End {
	case EndError, EndFailed:
		_ = x.emit(st.inband(x.errorFor(x.inbandKind(), f), f.End == EndFailed, f.Body != ""))
	case EndFiltered:
		_ = x.emit(st.tail(outcomeFiltered, sent, true))
	case EndReset:
		x.reset()
	case EndCut:
		// Returning ends the response cleanly (the terminating chunk is sent).
	}
}

func (x *exchange) emit(evs []sseEvent) error {
	var buf bytes.Buffer
	for _, e := range evs {
		e.encode(&buf)
	}
	return x.write(buf.Bytes())
}
