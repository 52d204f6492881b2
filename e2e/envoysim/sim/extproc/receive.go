package extproc

import (
	"errors"

	epv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// errSpurious marks absl::FailedPrecondition errors: an out-of-order or unexpected
// message from the server.
type errSpurious struct{ msg string }

func (e *errSpurious) Error() string { return e.msg }

func spurious(msg string) error { return &errSpurious{msg: msg} }

func statusCode(c int) *typev3.HttpStatus { return &typev3.HttpStatus{Code: typev3.StatusCode(c)} }

// effectiveModeOverride imitates effectiveModeOverride in ext_proc.cc: DEFAULT header
// and trailer modes mean "unchanged" (1.34+); body modes are always taken literally.
func effectiveModeOverride(target, existing *epv3.ProcessingMode) *epv3.ProcessingMode {
	m := &epv3.ProcessingMode{
		RequestHeaderMode:   existing.GetRequestHeaderMode(),
		ResponseHeaderMode:  existing.GetResponseHeaderMode(),
		RequestTrailerMode:  existing.GetRequestTrailerMode(),
		ResponseTrailerMode: existing.GetResponseTrailerMode(),
	}
	if target.GetRequestHeaderMode() != epv3.ProcessingMode_DEFAULT {
		m.RequestHeaderMode = target.GetRequestHeaderMode()
	}
	if target.GetResponseHeaderMode() != epv3.ProcessingMode_DEFAULT {
		m.ResponseHeaderMode = target.GetResponseHeaderMode()
	}
	if target.GetRequestTrailerMode() != epv3.ProcessingMode_DEFAULT {
		m.RequestTrailerMode = target.GetRequestTrailerMode()
	}
	if target.GetResponseTrailerMode() != epv3.ProcessingMode_DEFAULT {
		m.ResponseTrailerMode = target.GetResponseTrailerMode()
	}
	m.RequestBodyMode = target.GetRequestBodyMode()
	m.ResponseBodyMode = target.GetResponseBodyMode()
	return m
}

// onReceiveMessage imitates Filter::onReceiveMessage.
func (f *Filter) onReceiveMessage(resp *extprocv3.ProcessingResponse) {
	if f.processingComplete {
		// Messages after processing completed (e.g. after an ImmediateResponse) are ignored.
		return
	}
	// override_message_timeout: every other field of this response is ignored.
	if resp.GetOverrideMessageTimeout() != nil {
		f.onNewTimeout(resp.GetOverrideMessageTimeout().AsDuration())
		return
	}
	pm := f.cfg.Proto.GetProcessingMode()
	if f.cfg.Proto.GetAllowModeOverride() && !f.cfg.Proto.GetSendBodyWithoutWaitingForHeaderResponse() &&
		pm.GetRequestBodyMode() != epv3.ProcessingMode_FULL_DUPLEX_STREAMED &&
		pm.GetResponseBodyMode() != epv3.ProcessingMode_FULL_DUPLEX_STREAMED &&
		f.inHeaderProcessState() && resp.GetModeOverride() != nil {
		mo := effectiveModeOverride(resp.GetModeOverride(), pm)
		allowed := len(f.cfg.Proto.GetAllowedOverrideModes()) == 0
		for _, o := range f.cfg.Proto.GetAllowedOverrideModes() {
			// request_header_mode is not compared: it is not applicable.
			if mo.GetRequestBodyMode() == o.GetRequestBodyMode() && mo.GetRequestTrailerMode() == o.GetRequestTrailerMode() &&
				mo.GetResponseHeaderMode() == o.GetResponseHeaderMode() && mo.GetResponseBodyMode() == o.GetResponseBodyMode() &&
				mo.GetResponseTrailerMode() == o.GetResponseTrailerMode() {
				allowed = true
			}
		}
		if allowed {
			f.dec.setMode(mo)
			f.enc.setMode(mo)
		} else {
			f.log.Debug("ext_proc mode_override not in allowed_override_modes")
		}
	}

	var err error
	isLastBody := false
	switch r := resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders:
		f.setDynamicMetadata(resp)
		err = f.dec.handleHeadersResponse(r.RequestHeaders)
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		f.setDynamicMetadata(resp)
		err = f.enc.handleHeadersResponse(r.ResponseHeaders)
	case *extprocv3.ProcessingResponse_RequestBody:
		isLastBody = f.dec.isLastBodyResponse(r.RequestBody)
		f.setDynamicMetadata(resp)
		err = f.dec.handleBodyResponse(r.RequestBody)
	case *extprocv3.ProcessingResponse_ResponseBody:
		isLastBody = f.enc.isLastBodyResponse(r.ResponseBody)
		f.setDynamicMetadata(resp)
		err = f.enc.handleBodyResponse(r.ResponseBody)
	case *extprocv3.ProcessingResponse_RequestTrailers:
		f.setDynamicMetadata(resp)
		err = f.dec.handleTrailersResponse(r.RequestTrailers)
	case *extprocv3.ProcessingResponse_ResponseTrailers:
		f.setDynamicMetadata(resp)
		err = f.enc.handleTrailersResponse(r.ResponseTrailers)
	case *extprocv3.ProcessingResponse_ImmediateResponse:
		if f.cfg.Proto.GetDisableImmediateResponse() {
			err = spurious("unhandled immediate response due to config disabled it")
			break
		}
		f.setDynamicMetadata(resp)
		f.processingComplete = true
		f.finishCalls()
		f.closeStreamMaybeGraceful()
		f.sendImmediateResponse(r.ImmediateResponse)
	default:
		// Anything else (including streamed_immediate_response, which envoysim does not
		// implement) is spurious.
		err = spurious("unhandled message")
	}

	var sp *errSpurious
	switch {
	case err == nil:
	case errors.As(err, &sp):
		// Spurious responses follow failure_mode_allow since 1.35
		// (ext_proc_fail_close_spurious_resp, default true).
		if f.failureModeAllow() {
			f.closeStream()
			f.clearAsyncState()
			f.processingComplete = true
		} else {
			f.handleErrorResponse(err)
		}
	default:
		// E.g. a rejected header mutation: local reply with status_on_error.
		f.handleErrorResponse(err)
	}
	f.closeGrpcStreamIfLastRespReceived(resp, isLastBody)
}

// closeGrpcStreamIfLastRespReceived imitates the 1.37 stream close optimisation
// (envoy.reloadable_features.ext_proc_stream_close_optimization, default true): the
// stream is closed as soon as no more messages are expected.
func (f *Filter) closeGrpcStreamIfLastRespReceived(resp *extprocv3.ProcessingResponse, isLastBody bool) {
	if f.grpcStream == nil {
		return
	}
	last := false
	switch resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders:
		last = (f.dec.noBody || (f.dec.bodyMode == epv3.ProcessingMode_NONE && !f.dec.sendTrailers)) && f.enc.noExternalProcess()
	case *extprocv3.ProcessingResponse_RequestBody:
		last = isLastBody && f.enc.noExternalProcess()
	case *extprocv3.ProcessingResponse_RequestTrailers:
		last = f.enc.noExternalProcess()
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		last = f.enc.noBody || (f.enc.bodyMode == epv3.ProcessingMode_NONE && !f.enc.sendTrailers)
	case *extprocv3.ProcessingResponse_ResponseBody:
		last = isLastBody
	case *extprocv3.ProcessingResponse_ResponseTrailers:
		last = true
	}
	if last {
		f.closeStreamMaybeGraceful()
	}
}
