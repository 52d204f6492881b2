package fakeprovider

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
)

// exchange is one request being answered.
type exchange struct {
	s     *Server
	w     http.ResponseWriter
	r     *http.Request
	body  []byte
	route route
	id    int // per-server sequence number, for deterministic ids

	recIdx int
	recGen uint64

	fault   *Fault
	content Content
	// tiny is the state of the write-size sequence of Fault.TinyWrites (0: not started).
	tiny uint32
}

var errServerClosed = errors.New("fakeprovider: server closed")

// f returns the fault, or a zero Fault, so that callers read fields without nil checks.
func (x *exchange) f() *Fault {
	if x.fault == nil {
		x.fault = &Fault{}
	}
	return x.fault
}

func (x *exchange) requestID() string { return fmt.Sprintf("req_fake_%06d", x.id) }

func (x *exchange) created() int64 { return x.s.opts.Created }

// serve answers an admitted request.
func (x *exchange) serve() {
	f := x.f()
	if f.HeaderDelay > 0 {
		if err := x.pause(f.HeaderDelay, false); err != nil {
			if errors.Is(err, errServerClosed) {
				// Nothing was sent yet; an empty 200 would look like success.
				x.closedResponse()
			}
			return
		}
	}
	if f.isHTTPError() {
		kind := f.Error
		if kind == "" {
			kind = kindForStatus(f.Status)
		}
		x.sendError(x.errorFor(kind, f))
		return
	}
	switch x.route.ep {
	case epChat:
		x.chat()
	case epResponses:
		x.responses()
	case epEmbeddings:
		x.embeddings()
	case epMessages:
		x.messages()
	}
}

// inbandKind is the error an EndError/EndFailed fault reports: the fault's kind, else the
// dialect's typical mid-stream failure (OpenAI's server_error event of wire-formats §1.3,
// Anthropic's overloaded_error of §3.3).
func (x *exchange) inbandKind() ErrorKind {
	if k := x.f().Error; k != "" {
		return k
	}
	if x.s.opts.Kind == Anthropic {
		return Overloaded
	}
	return ServerError
}

// maxTokens returns the first of the body's integer fields that is present, or -1.
func (x *exchange) maxTokens(fields ...string) int {
	for _, f := range fields {
		if v := gjson.GetBytes(x.body, f); v.Exists() && v.Type == gjson.Number {
			return int(v.Int())
		}
	}
	return -1
}

// outcome is how the content part of an answer finished.
type outcome int

const (
	outcomeDone     outcome = iota // stop / end_turn / completed (tool_calls / tool_use)
	outcomeLength                  // the request's max tokens cut it
	outcomeFiltered                // the output filter stopped it (EndFiltered)
)

// plan returns the pieces to send, cut to limit when 0 <= limit < len (tool arguments are
// never cut, so they stay valid JSON).
func (x *exchange) plan(limit int) ([]string, outcome) {
	pieces := x.content.pieces()
	if x.content.ToolCall == nil && limit >= 0 && limit < len(pieces) {
		return pieces[:limit], outcomeLength
	}
	return pieces, outcomeDone
}

// sendResult answers a non-streaming request with build's body. In-band ends become the
// HTTP error of their kind, and EndFiltered keeps EndAfter pieces.
func (x *exchange) sendResult(pieces []string, o outcome, build func(sent []string, o outcome) []byte) {
	f := x.f()
	switch f.End {
	case EndError, EndFailed:
		x.sendError(x.errorFor(x.inbandKind(), f))
		return
	case EndFiltered:
		pieces, o = pieces[:min(f.EndAfter, len(pieces))], outcomeFiltered
	}
	x.writeBody(http.StatusOK, "application/json", build(pieces, o), nil)
}

func (x *exchange) closedResponse() {
	http.Error(x.w, errServerClosed.Error(), http.StatusServiceUnavailable)
	x.noteStatus(http.StatusServiceUnavailable)
}

func (x *exchange) sendError(e apiError) {
	x.writeBody(e.status, "application/json", e.body, e.header)
}

// writeBody writes a whole (non-SSE) answer, honouring FirstByteDelay and the EndCut and
// EndReset faults, which send only the first half of the body.
func (x *exchange) writeBody(status int, contentType string, body []byte, extra http.Header) {
	f := x.f()
	h := x.w.Header()
	x.commonHeaders(h)
	for k, vs := range extra {
		h[k] = vs
	}
	x.faultHeaders(h)
	h.Set("Content-Type", contentType)
	partial := f.End == EndCut || f.End == EndReset
	if f.FirstByteDelay == 0 && !partial {
		h.Set("Content-Length", strconv.Itoa(len(body)))
		x.writeHeader(status)
		_, _ = x.w.Write(body)
		return
	}
	x.writeHeader(status)
	if x.flush() != nil {
		return
	}
	if f.FirstByteDelay > 0 && x.pause(f.FirstByteDelay, false) != nil {
		return
	}
	if !partial {
		_, _ = x.w.Write(body)
		return
	}
	if x.write(body[:len(body)/2]) != nil {
		return
	}
	if f.End == EndReset {
		x.reset()
	}
}

func (x *exchange) writeHeader(status int) {
	x.w.WriteHeader(status)
	x.noteStatus(status)
}

func (x *exchange) noteStatus(status int) {
	x.s.updateRecord(x.recIdx, x.recGen, func(r *Request) { r.Status = status })
}

// write writes and flushes, so that every event reaches the client when it is produced;
// with Fault.TinyWrites in writes of 1 to 7 bytes, each flushed (Go's server sends each
// flush at once: HTTP/1 chunked, TCP_NODELAY).
func (x *exchange) write(b []byte) error {
	if len(b) == 0 {
		return x.flush()
	}
	for len(b) > 0 {
		n := len(b)
		if x.f().TinyWrites {
			n = min(n, x.tinySize())
		}
		if _, err := x.w.Write(b[:n]); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		if err := x.flush(); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// tinySize is the next write size of Fault.TinyWrites, 1 to 7, from a xorshift sequence
// seeded with the request's id: a run splits the same way every time.
func (x *exchange) tinySize() int {
	if x.tiny == 0 {
		x.tiny = uint32(x.id)*2654435761 | 1
	}
	x.tiny ^= x.tiny << 13
	x.tiny ^= x.tiny >> 17
	x.tiny ^= x.tiny << 5
	return 1 + int(x.tiny%7)
}

func (x *exchange) flush() error {
	if err := http.NewResponseController(x.w).Flush(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}

// pause waits d, writing ": keepalive" comments every Fault.Keepalive when sse is set. It
// returns early with an error when the client goes away or the Server is closed.
func (x *exchange) pause(d time.Duration, sse bool) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	var tick <-chan time.Time
	if ka := x.f().Keepalive; sse && ka > 0 {
		t := time.NewTicker(ka)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-timer.C:
			return nil
		case <-tick:
			if err := x.write([]byte(": keepalive\n\n")); err != nil {
				return err
			}
		case <-x.r.Context().Done():
			return fmt.Errorf("pause: %w", x.r.Context().Err())
		case <-x.s.done:
			return errServerClosed
		}
	}
}

// commonHeaders sets the headers every answer of the dialect carries.
func (x *exchange) commonHeaders(h http.Header) {
	switch x.s.opts.Kind {
	case OpenAI:
		// Header names from wire-formats §1.4 "Rate-limit headers"; resets are Go-style
		// durations.
		h.Set("x-request-id", x.requestID())
		h.Set("openai-organization", "org-fake")
		h.Set("openai-processing-ms", "1")
		h.Set("openai-version", "2020-10-01")
		h.Set("x-ratelimit-limit-requests", "10000")
		h.Set("x-ratelimit-remaining-requests", "9999")
		h.Set("x-ratelimit-reset-requests", "6ms")
		h.Set("x-ratelimit-limit-tokens", "30000000")
		h.Set("x-ratelimit-remaining-tokens", "29999000")
		h.Set("x-ratelimit-reset-tokens", "0s")
	case Azure:
		// Azure sends the remaining-* pair on chat completions (wire-formats §4.3).
		rid := fmt.Sprintf("00000000-0000-4000-8000-%012d", x.id)
		h.Set("apim-request-id", rid)
		h.Set("x-request-id", rid)
		h.Set("x-ms-region", "East US")
		h.Set("x-ratelimit-remaining-requests", "99")
		h.Set("x-ratelimit-remaining-tokens", "99000")
	case Anthropic:
		// request-id is what anthropic-sdk-go reports as Error.RequestID
		// (packages/ssestream/ssestream.go newAPIError); resets are RFC 3339 and
		// tokens-remaining is rounded to the thousand (wire-formats §3.5).
		reset := time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
		h.Set("request-id", x.requestID())
		h.Set("anthropic-ratelimit-requests-limit", "4000")
		h.Set("anthropic-ratelimit-requests-remaining", "3999")
		h.Set("anthropic-ratelimit-requests-reset", reset)
		h.Set("anthropic-ratelimit-tokens-limit", "400000")
		h.Set("anthropic-ratelimit-tokens-remaining", "399000")
		h.Set("anthropic-ratelimit-tokens-reset", reset)
	}
}

// faultHeaders adds the fault's retry and extra headers, last so they win.
func (x *exchange) faultHeaders(h http.Header) {
	f := x.f()
	if f.RetryAfter != "" {
		h.Set("retry-after", f.RetryAfter)
	}
	if f.RetryAfterMS != "" {
		h.Set("retry-after-ms", f.RetryAfterMS)
	}
	for k, vs := range f.Header {
		h[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
}
