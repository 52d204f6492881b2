package extproc

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/extproc/sse"
	"github.com/switchyard-gw/switchyard/extproc/stream"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

// A streamed response (behaviour §8) through the attempt role. The response headers are held
// while the body is read frame by frame (Envoy's chunks do not align with SSE events), until
// the first frame that commits output. Before that, any failure — an in-band error, a stall
// longer than idleMs, the deadline, a cut — becomes the 307 back to the route role and the
// client sees nothing. At the commit the headers and everything held go out in order, and
// every later chunk passes as it comes; a failure after it closes the stream with an in-band
// error event in the client's dialect carrying the request id, then ends the stream cleanly,
// so SDKs raise an error rather than return a silent truncation.

// DefaultMaxStreamHold bounds the bytes held before a committing frame; a provider that sends
// more preamble than this commits there (docs/extproc.md).
const DefaultMaxStreamHold = 1 << 20

// deadlineMargin: the attempt role ends a committed stream this long before the request's
// deadline, which is also Envoy's route timeout (x-envoy-upstream-rq-timeout-ms), so the
// error event still reaches the client.
const deadlineMargin = 500 * time.Millisecond

type streamState struct {
	parser sse.Parser
	cls    stream.Classifier
	// held: bytes kept for the client before the commit; out: what one chunk sends on.
	held, out []byte
	// failed is an in-band error before the commit (classified at once, the event's bytes
	// are only valid during Feed); upstreamErr one after it (passed on as the provider sent it).
	failed      *failure.Classification
	upstreamErr *failure.Classification
	committed   bool
	ended       bool // switchyard ended the client's stream
	lastByte    time.Time
	firstOutput time.Time
	idle        time.Duration // 0: no idle timeout
	deadline    time.Time
	timerAt     time.Time
	timer       <-chan time.Time
	timerMoved  bool // rearm made a new timer the watcher has not seen (kickTimer)
	hadBody     bool
}

// startStream prepares the streamed response of an attempt with a 2xx status.
func (p *attemptProcessor) startStream() {
	pol := p.dep.Policy(&p.snap.Settings, p.req.Operation, p.req.Mode())
	s := &streamState{lastByte: p.s.clock.Now(), idle: pol.Idle,
		deadline: p.state.Deadline().Add(-deadlineMargin)}
	s.cls.Reset(p.state.Dialect(), stream.Options{Provider: p.dep.Provider, ClientUsage: p.clientUsage,
		Model: p.cur.Model})
	p.sse = s
	p.phase = attemptHold
	p.rearm()
}

// rearm points the timer at the next idle or deadline moment. It fires early when bytes came
// in since (and re-arms then), so a steady stream allocates no timer per chunk.
func (p *attemptProcessor) rearm() {
	s := p.sse
	next := s.deadline
	if s.idle > 0 && s.lastByte.Add(s.idle).Before(next) {
		next = s.lastByte.Add(s.idle)
	}
	if s.timer != nil && !s.timerAt.After(next) {
		// The armed timer fires at or before next; onTimer re-arms then. Re-arming at
		// every chunk would allocate a timer per chunk (the idle moment moves each time).
		return
	}
	s.timerAt, s.timer = next, p.s.clock.After(next.Sub(p.s.clock.Now()))
	s.timerMoved = true
}

// kickTimer tells the timer watcher, started with the stream's first timer, that the timer
// changed. p.mu is held.
func (p *attemptProcessor) kickTimer() {
	if p.sse == nil || !p.sse.timerMoved {
		return
	}
	p.sse.timerMoved = false
	if p.timerKick == nil {
		p.timerKick = make(chan struct{}, 1)
		go p.watchTimer(p.timerKick)
	}
	select {
	case p.timerKick <- struct{}{}:
	default: // a kick is pending; the watcher reads the newest timer then
	}
}

// watchTimer waits on the stream's timer on a goroutine of its own, so the stream's
// goroutine can block in Recv, and handles it under p.mu when it fires. It ends when the
// stream does (end closes kick).
func (p *attemptProcessor) watchTimer(kick <-chan struct{}) {
	var timer <-chan time.Time
	for {
		select {
		case _, ok := <-kick:
			if !ok {
				return
			}
		case <-timer:
			p.mu.Lock()
			if !p.closed && p.timerC() == timer {
				if err := p.onTimer(); err != nil && !endOfStream(err) {
					p.s.log.Warn("ext_proc stream failed", "role", contract.RoleAttempt, "request", p.requestID, "err", err)
				}
			}
			p.sse.timerMoved = false // read below
			p.mu.Unlock()
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		timer = p.timerC()
		p.mu.Unlock()
	}
}

// timerC is the stream's timer, nil (never ready) when no stream is under way.
func (p *attemptProcessor) timerC() <-chan time.Time {
	if p.sse == nil || p.sse.ended || p.phase == attemptDone {
		return nil
	}
	return p.sse.timer
}

// onTimer handles the stream timer: a stall longer than idleMs (any byte counts, keepalives
// included, behaviour §6.1) or the deadline.
func (p *attemptProcessor) onTimer() error {
	s := p.sse
	s.timer = nil
	now := p.s.clock.Now()
	var t failure.Transport
	switch {
	case s.idle > 0 && !now.Before(s.lastByte.Add(s.idle)):
		t = failure.TransportIdle
	case !now.Before(s.deadline):
		t = failure.TransportTimeout
	default:
		p.rearm()
		return nil
	}
	c := failure.Classify(failure.Outcome{Provider: p.dep.Provider, Transport: t, Status: p.status}, now)
	if !s.committed {
		return p.failStream(c)
	}
	s.out = s.out[:0] // what earlier chunks queued went out with them
	return p.endCommitted(c, streamErrorInfo(p.clientFamily(), c, t))
}

// onStreamBody reads one body chunk of a streamed response.
func (p *attemptProcessor) onStreamBody(b []byte, endOfStream bool) error {
	s := p.sse
	if s.ended || p.phase == attemptDone {
		return nil // switchyard already ended the client's stream; Envoy tears down the rest
	}
	s.hadBody = true
	s.lastByte = p.s.clock.Now()
	s.out = s.out[:0]
	s.parser.Feed(b, p.onEvent)
	if endOfStream {
		s.parser.Flush(p.onEvent)
	}
	if s.failed != nil {
		return p.failStream(*s.failed)
	}
	if s.upstreamErr != nil && s.committed {
		c := *s.upstreamErr
		return p.endCommitted(c, stream.ErrorInfo{Type: c.Type, Code: c.Code, Message: c.Message})
	}
	if !s.committed && len(s.held)+len(s.out) > DefaultMaxStreamHold {
		s.committed = true // a huge preamble: commit here (docs/extproc.md)
	}
	if !s.committed {
		s.held = append(s.held, s.out...)
		if endOfStream {
			return p.endStream()
		}
		p.rearm()
		return nil
	}
	if err := p.commit(); err != nil {
		return err
	}
	if endOfStream {
		return p.endStream()
	}
	p.rearm()
	if len(s.out) == 0 {
		return nil
	}
	return p.sendStreamed(s.out, false)
}

// onEvent classifies one SSE block and queues the bytes the client gets for it.
func (p *attemptProcessor) onEvent(ev *sse.Event) {
	s := p.sse
	if s.failed != nil {
		return
	}
	v := s.cls.Classify(ev)
	switch {
	case v.Error && !s.committed:
		c := failure.Classify(p.inBandOutcome(ev), p.s.clock.Now())
		s.failed = &c
		return
	case v.Error:
		// After the commit the provider's error event is replaced by switchyard's, which
		// carries the request id (endStream); the rest of the stream is ignored.
		c := failure.Classify(p.inBandOutcome(ev), p.s.clock.Now())
		s.upstreamErr = &c
		return
	case s.upstreamErr != nil, v.Drop:
		return
	}
	if v.First {
		s.committed, s.firstOutput = true, p.s.clock.Now()
		p.s.metric.firstToken(p.dep, p.req.Model, s.firstOutput.Sub(p.sentAt))
	}
	if v.Final && p.unified {
		s.out = s.cls.AppendFinal(s.out, ev, p.unifiedJSON(s.cls.Anomalies()))
		return
	}
	s.out = s.cls.AppendEvent(s.out, ev)
}

// inBandOutcome is the in-band error event ev as routing/failure reads it, with the
// credentials to redact from its message.
func (p *attemptProcessor) inBandOutcome(ev *sse.Event) failure.Outcome {
	o := p.sse.cls.Outcome(ev)
	o.Secrets = p.secrets()
	return o
}

// endStream judges a stream whose upstream body ended (behaviour §8.4) and ends the client's.
func (p *attemptProcessor) endStream() error {
	s := p.sse
	done := s.cls.End()
	if s.upstreamErr != nil {
		done.State = stream.Failed
	}
	switch done.State {
	case stream.Truncated:
		c := failure.Classify(failure.Outcome{Provider: p.dep.Provider, Transport: failure.TransportTruncated, Status: p.status}, p.s.clock.Now())
		if !s.committed {
			return p.failStream(c)
		}
		return p.endCommitted(c, streamErrorInfo(p.clientFamily(), c, failure.TransportTruncated))
	case stream.Failed:
		if s.upstreamErr != nil {
			c := *s.upstreamErr
			return p.endCommitted(c, stream.ErrorInfo{Type: c.Type, Code: c.Code, Message: c.Message})
		}
	}
	// Complete, possibly with anomalies (never retried). An empty response is a response:
	// release what was held.
	s.committed = true
	if err := p.commit(); err != nil {
		return err
	}
	if p.unified && s.cls.Dialect() == dialect.Chat && slices.Contains(done.Anomalies, stream.AnomalyNoDone) {
		// A Chat stream that finished every choice without [DONE] gets its
		// unified_routing chunk at the end.
		s.out = s.cls.AppendFinal(s.out, nil, p.unifiedJSON(done.Anomalies))
	}
	p.phase = attemptDone
	if len(done.Anomalies) > 0 {
		p.s.log.Info("stream complete with anomalies", "request", p.requestID, "deployment", p.dep.ID, "anomalies", done.Anomalies)
		p.s.metric.streamAnomalies(p.dep, done.Anomalies)
	}
	p.finishStreamSuccess(done)
	return p.sendStreamed(s.out, true)
}

// commit releases the held response headers and puts everything held before this chunk's
// bytes, once: the headers, then the held frames, in order.
func (p *attemptProcessor) commit() error {
	if p.phase != attemptHold {
		return nil
	}
	s := p.sse
	p.phase = attemptPass
	if err := p.send(committedHeaders(p.clientHeaders())); err != nil {
		return err
	}
	s.out = append(s.held, s.out...)
	s.held = nil
	return nil
}

// failStream turns a stream that failed before its commit into the 307 back to the route
// role: nothing reached the client.
func (p *attemptProcessor) failStream(c failure.Classification) error {
	s := p.sse
	p.phase = attemptDone
	latency := p.s.clock.Now().Sub(p.sentAt)
	s.ended = true
	return p.redirect(c, latency, true, viaStream)
}

// endCommitted closes a committed stream that failed: the error event, then a clean end.
// Nothing is retried after the commit (behaviour §8.2, §12.1).
func (p *attemptProcessor) endCommitted(c failure.Classification, info stream.ErrorInfo) error {
	s := p.sse
	if err := p.commit(); err != nil {
		return err
	}
	p.phase = attemptDone
	s.ended = true
	latency := s.lastByte.Sub(p.sentAt)
	t := p.finish(routing.Result{Classification: c, Latency: latency})
	p.s.log.Info("stream failed after commit", "request", p.requestID, "deployment", p.dep.ID, "class", c.Class.String(),
		"kind", string(c.Kind), "latency_ms", latency.Milliseconds(), "circuit", transitionName(t))
	s.out = s.cls.AppendError(s.out, info, p.requestID)
	return p.sendStreamed(s.out, true)
}

func (p *attemptProcessor) finishStreamSuccess(done stream.Completion) {
	s := p.sse
	// Latency to the last upstream chunk (behaviour §3.3).
	p.finishServed(s.lastByte.Sub(p.sentAt), done.Usage.Completion, done.Usage.Total, slog.Bool("stream", true),
		slog.Int64("ttft_ms", s.firstOutput.Sub(p.sentAt).Milliseconds()), slog.String("finish_reason", done.FinishReason),
		slog.Any("anomalies", done.Anomalies))
}

// clientFamily is the client's error shape.
func (p *attemptProcessor) clientFamily() dialect.Family {
	return p.state.Dialect().Family()
}

// unifiedJSON is the unified_routing object of the attempt so far, with the stream's
// anomalies, as raw JSON.
func (p *attemptProcessor) unifiedJSON(anomalies []string) []byte {
	u := p.unifiedRouting(p.s.clock.Now().Sub(p.sentAt).Milliseconds())
	u.Anomalies = anomalies
	b, err := json.Marshal(u)
	if err != nil {
		return []byte("{}")
	}
	return b
}

// streamErrorInfo is the in-band error a committed stream ends with.
func streamErrorInfo(f dialect.Family, c failure.Classification, t failure.Transport) stream.ErrorInfo {
	code, msg := "upstream_stream_truncated", "The upstream stream ended before completion."
	switch t {
	case failure.TransportIdle:
		code, msg = "upstream_stream_idle", "The upstream stream went silent for longer than the idle timeout."
	case failure.TransportTimeout:
		code, msg = "timeout", "The request reached its deadline."
	}
	typ := "server_error"
	if f == dialect.Anthropic {
		typ = "api_error"
		if c.Status == http.StatusGatewayTimeout {
			typ = "timeout_error"
		}
	}
	return stream.ErrorInfo{Type: typ, Code: code, Message: msg}
}
