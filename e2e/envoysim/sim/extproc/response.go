package extproc

import (
	"errors"
	"strconv"

	epv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// processHeaderMutation imitates ProcessorState::processHeaderMutation.
func (d *direction) processHeaderMutation(c *extprocv3.CommonResponse) error {
	return applyHeaderMutations(c.GetHeaderMutation(), d.headers,
		c.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
		d.f.cfg.checker, d.shouldRemoveContentLength())
}

// callbackStateAfterHeaderResp imitates ProcessorState::getCallbackStateAfterHeaderResp.
func (d *direction) callbackStateAfterHeaderResp(c *extprocv3.CommonResponse) cbState {
	if c.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE {
		return cbIdle
	}
	if d.bodyMode == epv3.ProcessingMode_STREAMED && d.f.cfg.Proto.GetSendBodyWithoutWaitingForHeaderResponse() && len(d.queue) > 0 {
		return cbStreamedBody
	}
	if d.bodyMode == epv3.ProcessingMode_FULL_DUPLEX_STREAMED {
		if d.bodyReceived {
			return cbStreamedBody
		}
		if d.trailersAvail {
			return cbTrailers
		}
	}
	return cbIdle
}

// clearRouteCache imitates DecodingProcessorState::clearRouteCache: ignored for
// upstream filters, ignored without a header_mutation, then route_cache_action.
// The encoding side never clears the route cache.
func (d *direction) clearRouteCache(c *extprocv3.CommonResponse) {
	if !d.inbound || d.f.cb.IsUpstream() {
		return
	}
	if c.GetHeaderMutation() == nil {
		return
	}
	switch d.f.cfg.routeCacheAction {
	case epv3.ExternalProcessor_DEFAULT:
		if c.GetClearRouteCache() {
			d.f.cb.ClearRouteCache()
		}
	case epv3.ExternalProcessor_CLEAR:
		d.f.cb.ClearRouteCache()
	case epv3.ExternalProcessor_RETAIN:
	}
}

// sendBufferedDataInStreamedMode imitates ProcessorState::sendBufferedDataInStreamedMode.
func (d *direction) sendBufferedDataInStreamedMode(end bool) {
	if d.hasBuffered && len(d.buffered) > 0 {
		b := d.buffered
		d.buffered, d.hasBuffered = nil, false
		req := d.f.setupBodyChunk(d, b, end)
		d.queue = append(d.queue, chunk{data: b, end: end})
		d.f.sendBodyChunk(d, cbStreamedBody, req)
	}
}

// handleHeadersResponse imitates ProcessorState::handleHeadersResponse.
func (d *direction) handleHeadersResponse(r *extprocv3.HeadersResponse) error {
	if d.cb != cbHeaders {
		return spurious("spurious message")
	}
	c := r.GetResponse()
	if c.GetHeaderMutation() != nil {
		if err := d.processHeaderMutation(c); err != nil {
			return err
		}
	}
	d.clearRouteCache(c)
	d.finishCall(d.callbackStateAfterHeaderResp(c))

	if c.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE {
		// Replace the whole body, remove content-length, stop processing this direction.
		if c.GetBodyMutation() != nil {
			d.headers.Del("content-length")
			d.bodyReplaced = true
			d.buffered = applyBodyMutation(c.GetBodyMutation(), d.buffered)
			d.hasBuffered = true
		}
		if len(d.queue) > 1 { // ChunkQueue::clear
			d.queue = nil
		}
		d.bodyMode = epv3.ProcessingMode_NONE
		d.sendTrailers = false
	} else {
		switch {
		case d.noBody:
		case d.completeBody && d.bodyMode != epv3.ProcessingMode_NONE:
			if d.cb == cbIdle {
				if d.hasBuffered {
					// The whole body arrived while the headers were with the server: send it
					// as one buffered message, whatever the body mode.
					req := d.f.setupBodyChunk(d, d.buffered, !d.trailersAvail)
					d.f.sendBodyChunk(d, cbBufferedBody, req)
					return nil
				}
			} else {
				d.sendBufferedDataInStreamedMode(!d.trailersAvail)
				return nil
			}
		case d.bodyMode == epv3.ProcessingMode_BUFFERED:
			// Keep holding the headers until the body arrives.
			return nil
		case d.bodyMode == epv3.ProcessingMode_STREAMED:
			d.sendBufferedDataInStreamedMode(false)
			d.continueIfNecessary()
			return nil
		case d.bodyMode == epv3.ProcessingMode_FULL_DUPLEX_STREAMED:
			d.continueIfNecessary()
			return nil
		case d.bodyMode == epv3.ProcessingMode_BUFFERED_PARTIAL:
			if d.hasBuffered && len(d.buffered) > 0 {
				d.queue = append(d.queue, chunk{data: d.buffered})
				d.buffered, d.hasBuffered = nil, false
			}
			if d.queueBytes() > d.f.cb.BufferLimit() {
				d.consolidate()
				req := d.f.setupBodyChunk(d, d.queue[0].data, false)
				d.f.sendBodyChunk(d, cbBufferedPartial, req)
			}
			return nil
		}
		if d.sendTrailers && d.trailersAvail {
			d.f.sendTrailers(d)
			return nil
		}
	}
	d.headers = nil
	d.continueIfNecessary()
	return nil
}

// handleBodyResponse imitates ProcessorState::handleBodyResponse.
func (d *direction) handleBodyResponse(r *extprocv3.BodyResponse) error {
	if d.cb != cbBufferedBody && d.cb != cbStreamedBody && d.cb != cbBufferedPartial {
		return spurious("spurious message")
	}
	c := r.GetResponse()
	var cont bool
	var err error
	switch d.cb {
	case cbBufferedBody:
		cont, err = d.handleBufferedBody(c)
	case cbStreamedBody:
		cont, err = d.handleStreamedBodyCallback(c)
	case cbBufferedPartial:
		cont, err = d.handleBufferedPartialBody(c)
	}
	if err != nil {
		return err
	}
	d.clearRouteCache(c)
	d.finalizeBodyResponse(cont)
	return nil
}

// handleBufferedBody imitates ProcessorState::handleBufferedBodyCallback: header
// mutations apply (headers are still held) and a kept content-length must match the
// new body (validateContentLength).
func (d *direction) handleBufferedBody(c *extprocv3.CommonResponse) (bool, error) {
	if c.GetHeaderMutation() != nil && d.headers != nil {
		if err := d.processHeaderMutation(c); err != nil {
			return false, err
		}
	}
	if c.GetBodyMutation() != nil {
		if d.headers != nil {
			if cl, ok := d.headers.Get("content-length"); ok {
				if n, perr := strconv.ParseUint(cl, 10, 64); perr == nil && n != uint64(len(c.GetBodyMutation().GetBody())) {
					return false, errors.New("mismatch between content length and the length of the mutated body")
				}
			}
		}
		d.buffered = applyBodyMutation(c.GetBodyMutation(), d.buffered)
		d.hasBuffered = true
	}
	d.finishCall(cbIdle)
	return true, nil
}

// handleStreamedBodyCallback imitates ProcessorState::handleStreamedBodyCallback.
func (d *direction) handleStreamedBodyCallback(c *extprocv3.CommonResponse) (bool, error) {
	if c.GetBodyMutation().GetStreamedResponse() != nil {
		if d.bodyMode != epv3.ProcessingMode_FULL_DUPLEX_STREAMED {
			return false, spurious("spurious message: streamed_response is received while body_mode_ is not FULL_DUPLEX_STREAMED")
		}
		return d.handleDuplexStreamedBody(c), nil
	}
	if d.bodyMode == epv3.ProcessingMode_FULL_DUPLEX_STREAMED {
		return false, spurious("spurious message: Normal body mutation response is received while body_mode_ is FULL_DUPLEX_STREAMED")
	}
	return d.handleStreamedBody(c)
}

// handleStreamedBody imitates ProcessorState::handleStreamedBodyResponse: one response
// per queued chunk, FIFO; the mutation replaces that chunk; header mutations ignored.
func (d *direction) handleStreamedBody(c *extprocv3.CommonResponse) (bool, error) {
	if len(d.queue) == 0 {
		return false, envoyError("Bad streamed body callback state")
	}
	ch := d.queue[0]
	d.queue = d.queue[1:]
	data := ch.data
	if c.GetBodyMutation() != nil {
		data = applyBodyMutation(c.GetBodyMutation(), data)
	}
	if len(data) > 0 {
		d.emitData(data, ch.end)
	}
	if len(d.queue) == 0 {
		d.finishCall(cbIdle)
	} else {
		d.finishCall(d.cb)
	}
	return ch.end, nil
}

// handleDuplexStreamedBody imitates ProcessorState::handleDuplexStreamedBodyResponse:
// only bytes from streamed_response reach the next filter; the direction finishes on
// end_of_stream.
func (d *direction) handleDuplexStreamedBody(c *extprocv3.CommonResponse) bool {
	sr := c.GetBodyMutation().GetStreamedResponse()
	if len(sr.GetBody()) > 0 {
		d.emitData(sr.GetBody(), sr.GetEndOfStream())
	}
	if sr.GetEndOfStream() {
		d.duplexEnd = true
		d.finishCall(cbIdle)
	} else {
		d.finishCall(cbStreamedBody)
	}
	return sr.GetEndOfStream()
}

// handleBufferedPartialBody imitates ProcessorState::handleBufferedPartialBodyCallback.
func (d *direction) handleBufferedPartialBody(c *extprocv3.CommonResponse) (bool, error) {
	if len(d.queue) == 0 {
		return false, envoyError("Invalid chunk in partial body callback")
	}
	ch := d.queue[0]
	d.queue = d.queue[1:]
	if c.GetHeaderMutation() != nil && d.headers != nil {
		if err := d.processHeaderMutation(c); err != nil {
			return false, err
		}
	}
	data := ch.data
	if c.GetBodyMutation() != nil {
		data = applyBodyMutation(c.GetBodyMutation(), data)
	}
	if len(data) > 0 {
		d.emitData(data, ch.end)
	}
	d.finishCall(cbIdle)
	if len(d.queue) > 0 {
		d.consolidate()
		left := d.queue[0]
		d.queue = nil
		d.emitData(left.data, left.end)
	}
	d.partialDone = true
	return true, nil
}

// finalizeBodyResponse imitates ProcessorState::finalizeBodyResponse.
func (d *direction) finalizeBodyResponse(cont bool) {
	d.headers = nil
	if d.sendTrailers && d.trailersAvail && len(d.queue) == 0 {
		d.f.sendTrailers(d)
		return
	}
	if cont || (d.trailersAvail && len(d.queue) == 0) {
		d.continueIfNecessary()
	}
}

// handleTrailersResponse imitates ProcessorState::handleTrailersResponse: accepted in
// TrailersCallback, or any time in FULL_DUPLEX_STREAMED.
func (d *direction) handleTrailersResponse(r *extprocv3.TrailersResponse) error {
	if d.cb != cbTrailers && d.bodyMode != epv3.ProcessingMode_FULL_DUPLEX_STREAMED {
		return spurious("spurious message")
	}
	if r.GetHeaderMutation() != nil && d.trailers != nil {
		if err := applyHeaderMutations(r.GetHeaderMutation(), d.trailers, false, d.f.cfg.checker, false); err != nil {
			return err
		}
	}
	d.finishCall(cbIdle)
	d.continueIfNecessary()
	return nil
}

// isLastBodyResponse imitates isLastBodyResponse in ext_proc.cc.
func (d *direction) isLastBodyResponse(r *extprocv3.BodyResponse) bool {
	switch d.bodyMode {
	case epv3.ProcessingMode_STREAMED:
		return len(d.queue) > 0 && d.queue[0].end
	case epv3.ProcessingMode_FULL_DUPLEX_STREAMED:
		return r.GetResponse().GetBodyMutation().GetStreamedResponse().GetEndOfStream()
	}
	return false
}
