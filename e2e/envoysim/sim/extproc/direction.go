package extproc

import (
	"time"

	epv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// cbState imitates ProcessorState::CallbackState.
type cbState int

const (
	cbIdle cbState = iota
	cbHeaders
	cbBufferedBody
	cbStreamedBody
	cbBufferedPartial
	cbTrailers
)

type chunk struct {
	data []byte
	end  bool
}

// direction imitates ProcessorState (DecodingProcessorState / EncodingProcessorState):
// the per-direction state of the filter. Envoy's filter manager "stops iteration"
// and buffers; here the held frames are explicit and emitted to out in order.
type direction struct {
	f       *Filter
	inbound bool
	out     *stream.Queue[stream.Frame]

	sendHeaders  bool
	sendTrailers bool
	bodyMode     epv3.ProcessingMode_BodySendMode

	cb     cbState
	paused bool

	headers      *stream.Headers // Envoy headers_: target of header mutations, nil once released
	held         *stream.Headers // the headers of this direction (emitted at most once)
	seen         *stream.Headers
	headersOut   bool
	noBody       bool
	completeBody bool
	bodyReceived bool
	bodyReplaced bool
	partialDone  bool
	duplexEnd    bool

	buffered    []byte // the filter manager's buffered data (StopIterationAndBuffer)
	hasBuffered bool
	queue       []chunk // ChunkQueue (STREAMED, BUFFERED_PARTIAL)

	trailers         *stream.Headers
	trailersAvail    bool
	trailersToServer bool
	trailersOut      bool
	endOut           bool

	attrsSent  bool
	timer      *time.Timer
	armed      bool
	newTimeout bool
}

// setMode imitates setProcessingModeInternal: headers are sent unless SKIP, trailers
// only when SEND.
func (d *direction) setMode(pm *epv3.ProcessingMode) {
	if d.inbound {
		d.sendHeaders = pm.GetRequestHeaderMode() != epv3.ProcessingMode_SKIP
		d.sendTrailers = pm.GetRequestTrailerMode() == epv3.ProcessingMode_SEND
		d.bodyMode = pm.GetRequestBodyMode()
	} else {
		d.sendHeaders = pm.GetResponseHeaderMode() != epv3.ProcessingMode_SKIP
		d.sendTrailers = pm.GetResponseTrailerMode() == epv3.ProcessingMode_SEND
		d.bodyMode = pm.GetResponseBodyMode()
	}
}

// shouldRemoveContentLength imitates ProcessorState::shouldRemoveContentLength.
func (d *direction) shouldRemoveContentLength() bool {
	switch d.bodyMode {
	case epv3.ProcessingMode_STREAMED, epv3.ProcessingMode_FULL_DUPLEX_STREAMED, epv3.ProcessingMode_BUFFERED_PARTIAL:
		return true
	case epv3.ProcessingMode_BUFFERED:
		return !d.sendHeaders
	}
	return false
}

// noExternalProcess imitates ProcessorState::noExternalProcess: nothing of this
// direction goes to the server.
func (d *direction) noExternalProcess() bool {
	return !d.sendHeaders && !d.sendTrailers && d.bodyMode == epv3.ProcessingMode_NONE
}

func (d *direction) queueBytes() int {
	n := 0
	for _, c := range d.queue {
		n += len(c.data)
	}
	return n
}

// --- timers (onStartProcessorCall / onFinishProcessorCall / restartMessageTimer) ---

func (d *direction) timerC() <-chan time.Time {
	if !d.armed {
		return nil
	}
	return d.timer.C
}

func (d *direction) arm(t time.Duration) {
	if d.timer == nil {
		d.timer = time.NewTimer(t)
	} else {
		d.timer.Reset(t)
	}
	d.armed = true
}

func (d *direction) disarm() {
	if d.timer != nil {
		d.timer.Stop()
	}
	d.armed = false
}

// startCall imitates ProcessorState::onStartProcessorCall: every message that expects
// a response re-arms the direction's one timer; FULL_DUPLEX_STREAMED has none.
func (d *direction) startCall(next cbState) {
	d.cb = next
	if d.bodyMode != epv3.ProcessingMode_FULL_DUPLEX_STREAMED {
		d.arm(d.f.cfg.MessageTimeout)
	}
	d.newTimeout = false
}

// finishCall imitates ProcessorState::onFinishProcessorCall.
func (d *direction) finishCall(next cbState) {
	d.disarm()
	d.cb = next
	d.newTimeout = false
}

// restartTimer imitates ProcessorState::restartMessageTimer: once per state.
func (d *direction) restartTimer(t time.Duration) bool {
	if d.armed && !d.newTimeout {
		d.arm(t)
		d.newTimeout = true
		return true
	}
	return false
}

// --- emitting to the next filter ---

func (d *direction) emitHeaders(end bool) {
	if d.headersOut || d.held == nil {
		return
	}
	d.out.Push(stream.HeadersFrame(d.held, end))
	d.headersOut = true
	if end {
		d.endOut = true
	}
}

// emitData passes data on (injectDataToFilterChain or continuing with buffered data).
// Headers always precede data. Data never ends a stream that has trailers: the next
// filter's end_stream is end_stream && no trailers (FilterManager::decodeData and
// encodeData in source/common/http/filter_manager.cc), so a FULL_DUPLEX_STREAMED
// processor ending the body with end_of_stream still leaves the trailers to end it.
func (d *direction) emitData(b []byte, end bool) {
	if d.endOut {
		return
	}
	if d.trailersAvail && !d.trailersOut {
		end = false
	}
	if !d.headersOut {
		d.emitHeaders(false)
	}
	if len(b) == 0 && !end {
		return
	}
	d.out.Push(stream.DataFrame(b, end))
	if end {
		d.endOut = true
	}
}

func (d *direction) emitTrailers() {
	if d.trailersOut || d.endOut || d.trailers == nil {
		return
	}
	if !d.headersOut {
		d.emitHeaders(false)
	}
	d.out.Push(stream.TrailersFrame(d.trailers))
	d.trailersOut, d.endOut = true, true
}

// mayEnd: the direction's end_stream can be passed on only when no body chunk is still
// with the server.
func (d *direction) mayEnd() bool {
	if len(d.queue) > 0 && !d.f.processingComplete {
		return false
	}
	if d.bodyMode == epv3.ProcessingMode_FULL_DUPLEX_STREAMED && !d.duplexEnd && !d.f.processingComplete {
		return false
	}
	return true
}

// continueIfNecessary imitates ProcessorState::continueIfNecessary: resume the filter
// chain where this filter stopped (headers, then buffered data, then trailers).
func (d *direction) continueIfNecessary() {
	if !d.paused {
		return
	}
	d.paused = false
	d.resume()
}

func (d *direction) resume() {
	if d.noBody {
		// A bodyless message whose body CONTINUE_AND_REPLACE set: the filter manager
		// continues with the headers without end_stream, then the buffered body with it
		// (FilterManager commonContinue: doHeaders(observedEndStream() && !bufferedData()),
		// then doData).
		if d.hasBuffered {
			b := d.buffered
			d.buffered, d.hasBuffered = nil, false
			d.emitHeaders(false)
			d.emitData(b, true)
			return
		}
		d.emitHeaders(true)
		return
	}
	if !d.headersOut {
		d.emitHeaders(false)
	}
	canEnd := d.completeBody && !d.trailersAvail && d.mayEnd()
	if d.hasBuffered {
		b := d.buffered
		d.buffered, d.hasBuffered = nil, false
		d.emitData(b, canEnd)
	} else if canEnd {
		d.emitData(nil, true)
	}
	if d.trailersAvail && len(d.queue) == 0 {
		d.emitTrailers()
	}
}

// addBuffered imitates returning StopIterationAndBuffer: the filter manager buffers.
// Over the buffer limit Envoy answers 413 (request) or 500 (response)
// (ActiveStreamDecoderFilter::requestDataTooLarge / responseDataTooLarge in
// source/common/http/filter_manager.cc).
func (d *direction) addBuffered(b []byte, enforceLimit bool) bool {
	d.buffered = append(d.buffered, b...)
	d.hasBuffered = true
	if enforceLimit && len(d.buffered) > d.f.cb.BufferLimit() {
		d.f.processingComplete = true
		d.f.finishCalls()
		d.f.closeStream()
		reply := &stream.LocalReply{Status: 413, Body: "Payload Too Large", Details: "request_payload_too_large"}
		if !d.inbound {
			reply = &stream.LocalReply{Status: 500, Body: "Internal Server Error", Details: "response_payload_too_large"}
		}
		d.f.replied = true
		d.f.encOut.Push(stream.LocalReplyFrame(reply))
		return false
	}
	return true
}

// --- filter callbacks: decodeHeaders/encodeHeaders, decodeData/encodeData, trailers ---

// onHeaders imitates Filter::decodeHeaders / encodeHeaders / onHeaders.
func (d *direction) onHeaders(h *stream.Headers, end bool) {
	f := d.f
	d.held, d.seen = h, h
	d.noBody = end
	if end {
		d.completeBody = true
	}
	send := d.sendHeaders && (d.inbound || !f.processingComplete)
	if send {
		switch f.openStream() {
		case openIgnoreError:
			send = false
		}
	}
	if !send || f.processingComplete {
		if !f.processingComplete && d.shouldRemoveContentLength() {
			h.Del("content-length")
		}
		d.emitHeaders(end)
		if !d.inbound && d.noExternalProcess() {
			f.closeStreamMaybeGraceful()
		}
		return
	}
	d.headers = h
	req := f.buildHeaderRequest(d, h, end)
	d.startCall(cbHeaders)
	f.send(req)
	d.paused = true
	// Content-length is removed after the headers message was built, so the server
	// still sees it (decodeHeaders removes it after onHeaders returns).
	if d.shouldRemoveContentLength() {
		h.Del("content-length")
	}
}

// onData imitates Filter::onData and the handleData*Mode functions.
func (d *direction) onData(b []byte, end bool) {
	f := d.f
	d.bodyReceived = true
	if end {
		d.completeBody = true
	}
	if d.bodyReplaced {
		// CONTINUE_AND_REPLACE: original chunks are drained.
		if end {
			d.emitData(nil, true)
		}
		return
	}
	if f.processingComplete {
		if d.paused {
			d.addBuffered(b, false)
			return
		}
		d.emitData(b, end)
		return
	}
	if d.cb == cbHeaders {
		streamEarly := (d.bodyMode == epv3.ProcessingMode_STREAMED && f.cfg.Proto.GetSendBodyWithoutWaitingForHeaderResponse()) ||
			d.bodyMode == epv3.ProcessingMode_FULL_DUPLEX_STREAMED
		if !streamEarly {
			// Header processing in progress: hold the body. BUFFERED uses
			// StopIterationAndBuffer (buffer limit → 413), others the watermark.
			d.paused = true
			d.addBuffered(b, d.bodyMode == epv3.ProcessingMode_BUFFERED)
			return
		}
	}
	switch d.bodyMode {
	case epv3.ProcessingMode_BUFFERED:
		d.paused = true
		if !d.addBuffered(b, true) {
			return
		}
		if end {
			switch f.openStream() {
			case openIgnoreError:
				d.continueIfNecessary()
				return
			}
			req := f.setupBodyChunk(d, d.buffered, true)
			f.sendBodyChunk(d, cbBufferedBody, req)
		}
	case epv3.ProcessingMode_STREAMED, epv3.ProcessingMode_FULL_DUPLEX_STREAMED:
		// handleDataStreamedModeBase: STREAMED queues the chunk, FULL_DUPLEX drains it;
		// either way the chunk goes to the server now.
		switch f.openStream() {
		case openIgnoreError:
			d.emitData(b, end)
			return
		}
		req := f.setupBodyChunk(d, b, end)
		if d.bodyMode == epv3.ProcessingMode_STREAMED {
			d.queue = append(d.queue, chunk{data: append([]byte(nil), b...), end: end})
		}
		next := cbStreamedBody
		if d.cb == cbHeaders {
			next = cbHeaders
		}
		f.sendBodyChunk(d, next, req)
		if end || d.cb == cbHeaders {
			d.paused = true
		}
	case epv3.ProcessingMode_BUFFERED_PARTIAL:
		d.onDataBufferedPartial(b, end)
	default:
		if d.paused {
			d.addBuffered(b, false)
			return
		}
		d.emitData(b, end)
	}
}

// onDataBufferedPartial imitates Filter::handleDataBufferedPartialMode.
func (d *direction) onDataBufferedPartial(b []byte, end bool) {
	f := d.f
	switch {
	case d.partialDone:
		d.headers = nil
		d.emitData(b, end)
	case d.cb == cbBufferedPartial:
		d.queue = append(d.queue, chunk{data: append([]byte(nil), b...), end: end})
		d.paused = true
	default:
		d.queue = append(d.queue, chunk{data: append([]byte(nil), b...), end: end})
		d.paused = true
		if end || d.queueBytes() > f.cb.BufferLimit() {
			d.sendStreamChunk()
		}
	}
}

// sendStreamChunk imitates Filter::sendStreamChunk (BUFFERED_PARTIAL).
func (d *direction) sendStreamChunk() {
	f := d.f
	switch f.openStream() {
	case openIgnoreError:
		d.continueIfNecessary()
		return
	}
	d.consolidate()
	c := d.queue[0]
	req := f.setupBodyChunk(d, c.data, c.end)
	f.sendBodyChunk(d, cbBufferedPartial, req)
	d.paused = true
}

// consolidate imitates ChunkQueue::consolidate.
func (d *direction) consolidate() {
	if len(d.queue) <= 1 {
		return
	}
	var all []byte
	for _, c := range d.queue {
		all = append(all, c.data...)
	}
	d.queue = []chunk{{data: all, end: d.queue[len(d.queue)-1].end}}
}

// onTrailers imitates Filter::onTrailers.
func (d *direction) onTrailers(t *stream.Headers) {
	f := d.f
	if f.processingComplete {
		d.trailers, d.trailersAvail = t, true
		d.completeBody = true
		if d.paused {
			return
		}
		d.emitTrailers()
		return
	}
	bodyDelivered := d.completeBody
	d.completeBody = true
	d.trailers, d.trailersAvail = t, true
	if d.cb != cbIdle && d.bodyMode != epv3.ProcessingMode_FULL_DUPLEX_STREAMED {
		d.paused = true
		return
	}
	if !bodyDelivered && ((d.hasBuffered && d.bodyMode == epv3.ProcessingMode_BUFFERED) ||
		(len(d.queue) > 0 && d.bodyMode == epv3.ProcessingMode_BUFFERED_PARTIAL)) {
		switch f.openStream() {
		case openIgnoreError:
			d.continueIfNecessary()
			return
		}
		if d.bodyMode == epv3.ProcessingMode_BUFFERED {
			req := f.setupBodyChunk(d, d.buffered, false)
			f.sendBodyChunk(d, cbBufferedBody, req)
		} else {
			d.consolidate()
			req := f.setupBodyChunk(d, d.queue[0].data, false)
			f.sendBodyChunk(d, cbBufferedPartial, req)
		}
		d.paused = true
		return
	}
	if !d.sendTrailers {
		if d.paused {
			return
		}
		d.emitTrailers()
		return
	}
	switch f.openStream() {
	case openIgnoreError:
		d.emitTrailers()
		return
	}
	f.sendTrailers(d)
	d.paused = true
}
