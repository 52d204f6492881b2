package extproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	epv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// Filter is one ext_proc filter instance: one per downstream stream, or one per
// upstream attempt when it sits in a cluster's upstream filter chain (the upstream
// filter chain is created per UpstreamRequest, source/common/router/upstream_request.cc).
type Filter struct {
	cfg    *Config
	cb     stream.Callbacks
	client extprocv3.ExternalProcessorClient
	log    *slog.Logger

	dec, enc *direction
	encOut   *stream.Queue[stream.Frame]

	processingComplete    bool
	replied               bool // this filter (or a later one) sent a local reply
	protocolConfigEncoded bool

	grpcStream extprocv3.ExternalProcessor_ProcessClient
	grpcCancel context.CancelFunc
	grpcGen    int
	events     chan grpcEvent
}

type grpcEvent struct {
	gen  int
	resp *extprocv3.ProcessingResponse
	err  error
}

// New returns a filter for one stream or attempt. conn is the gRPC connection to the
// ext_proc cluster.
func New(cfg *Config, conn grpc.ClientConnInterface, cb stream.Callbacks, log *slog.Logger) *Filter {
	f := &Filter{
		cfg:    cfg,
		cb:     cb,
		client: extprocv3.NewExternalProcessorClient(newLimitConn(conn, cfg.MaxReceiveMessageLength)),
		log:    log,
		events: make(chan grpcEvent),
	}
	pm := cfg.Proto.GetProcessingMode()
	f.dec = &direction{f: f, inbound: true}
	f.enc = &direction{f: f}
	f.dec.setMode(pm)
	f.enc.setMode(pm)
	return f
}

// Run processes the stream until ctx is cancelled (the filter is destroyed).
func (f *Filter) Run(ctx context.Context, io stream.IO) {
	f.dec.out = io.DecodeOut
	f.enc.out = io.EncodeOut
	f.encOut = io.EncodeOut
	defer f.onDestroy()
	for {
		select {
		case <-ctx.Done():
			return
		case <-io.DecodeIn.Ready():
			for _, fr := range io.DecodeIn.Drain() {
				f.onFrame(f.dec, fr)
			}
		case <-io.EncodeIn.Ready():
			for _, fr := range io.EncodeIn.Drain() {
				f.onFrame(f.enc, fr)
			}
		case ev := <-f.events:
			f.onGrpcEvent(ev)
		case <-f.dec.timerC():
			f.dec.armed = false
			f.onMessageTimeout()
		case <-f.enc.timerC():
			f.enc.armed = false
			f.onMessageTimeout()
		}
	}
}

// onFrame dispatches the filter callbacks (decode*/encode* in ext_proc.cc).
func (f *Filter) onFrame(d *direction, fr stream.Frame) {
	if f.replied && fr.Kind != stream.KindFlush {
		return
	}
	switch fr.Kind {
	case stream.KindFlush:
		d.out.Push(fr)
	case stream.KindLocalReply, stream.KindReset:
		// Local replies from later filters bypass this filter (filter_manager.cc
		// sendLocalReply; ext_proc does not see local replies since 1.34), and an
		// upstream reset goes straight to the router, ahead of anything held here.
		f.replied = true
		f.encOut.Push(fr)
	case stream.KindHeaders:
		d.onHeaders(fr.Headers, fr.End)
	case stream.KindData:
		d.onData(fr.Data, fr.End)
	case stream.KindTrailers:
		d.onTrailers(fr.Headers)
	}
}

// onDestroy imitates Filter::onDestroy: stop timers and close the stream (a reset:
// the Go server sees codes.Canceled).
func (f *Filter) onDestroy() {
	f.processingComplete = true
	f.dec.disarm()
	f.enc.disarm()
	f.closeStream()
}

type openState int

const (
	openOK openState = iota
	openIgnoreError
)

// openStream imitates Filter::openStream: lazily opens one Process stream, with
// grpc_service.initial_metadata and grpc_service.timeout; IgnoreError once processing
// is complete. (Envoy's Error result needs a synchronous start failure, see below.)
func (f *Filter) openStream() openState {
	if f.processingComplete {
		return openIgnoreError
	}
	if f.grpcStream != nil {
		return openOK
	}
	ctx, cancel := context.WithCancel(f.cb.Context())
	if f.cfg.StreamTimeout > 0 {
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeout(ctx, f.cfg.StreamTimeout)
		prev := cancel
		cancel = func() { c2(); prev() }
	}
	if len(f.cfg.InitialMetadata) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, f.cfg.InitialMetadata.Copy())
	}
	st, err := f.client.Process(ctx)
	f.grpcGen++
	gen := f.grpcGen
	f.grpcCancel = cancel
	events := f.events
	if err != nil {
		// grpc-go fails at once when the processor is unreachable; Envoy's async client
		// starts the stream and reports the connect failure later (onRemoteClose →
		// onGrpcError), so the error arrives as an event here too. Envoy's synchronous
		// start failure (openStream's "Stream failed while starting") needs a missing
		// cluster or host, which envoysim rejects at load.
		f.grpcStream = failedStream{}
		f.cb.Go(func() {
			select {
			case events <- grpcEvent{gen: gen, err: err}:
			case <-ctx.Done():
			}
		})
		return openOK
	}
	f.grpcStream = st
	f.cb.Go(func() {
		for {
			resp, err := st.Recv()
			select {
			case events <- grpcEvent{gen: gen, resp: resp, err: err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	})
	return openOK
}

// failedStream stands for a stream whose start failed: messages are dropped until
// the failure is delivered.
type failedStream struct {
	extprocv3.ExternalProcessor_ProcessClient
}

func (failedStream) Send(*extprocv3.ProcessingRequest) error { return nil }

// closeStream imitates Filter::closeStream. Envoy's default close resets the stream
// (ExternalProcessorStreamImpl::close), so the server's Recv returns codes.Canceled.
func (f *Filter) closeStream() {
	if f.grpcStream == nil {
		return
	}
	f.grpcCancel()
	f.grpcStream = nil
	f.grpcCancel = nil
}

// closeStreamMaybeGraceful imitates Filter::closeStreamMaybeGraceful with the default
// envoy.reloadable_features.ext_proc_graceful_grpc_close=false.
func (f *Filter) closeStreamMaybeGraceful() {
	f.processingComplete = true
	f.closeStream()
}

func (f *Filter) send(req *extprocv3.ProcessingRequest) {
	if f.grpcStream == nil {
		return
	}
	// A failed Send surfaces as an error from Recv, which drives onGrpcError.
	_ = f.grpcStream.Send(req)
}

// encodeProtocolConfig imitates Filter::encodeProtocolConfig: the first message of the
// stream carries the body modes (1.34+).
func (f *Filter) encodeProtocolConfig(req *extprocv3.ProcessingRequest) {
	if f.protocolConfigEncoded {
		return
	}
	req.ProtocolConfig = &extprocv3.ProtocolConfiguration{
		RequestBodyMode:                         f.dec.bodyMode,
		ResponseBodyMode:                        f.enc.bodyMode,
		SendBodyWithoutWaitingForHeaderResponse: f.cfg.Proto.GetSendBodyWithoutWaitingForHeaderResponse(),
	}
	f.protocolConfigEncoded = true
}

// addDynamicMetadata imitates Filter::addDynamicMetadata: every message carries the
// forwarding namespaces of the request's dynamic metadata.
func (f *Filter) addDynamicMetadata(req *extprocv3.ProcessingRequest) {
	md := &corev3.Metadata{}
	for _, ns := range f.cfg.forwardNS {
		if s, ok := f.cb.DynamicMetadata().Get(ns); ok {
			if md.FilterMetadata == nil {
				md.FilterMetadata = map[string]*structpb.Struct{}
			}
			md.FilterMetadata[ns] = s
		}
	}
	req.MetadataContext = md
}

// addAttributes imitates Filter::addAttributes: once per direction, on its first message.
func (f *Filter) addAttributes(d *direction, req *extprocv3.ProcessingRequest) {
	exprs := f.cfg.requestAttrs
	if !d.inbound {
		exprs = f.cfg.responseAttrs
	}
	if d.attrsSent || len(exprs) == 0 {
		return
	}
	s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	var resp *stream.Headers
	if !d.inbound {
		resp = d.seen
	}
	for _, e := range exprs {
		if v, ok := e.evaluate(f.cb.Attributes(), f.cb.DynamicMetadata(), resp); ok {
			s.Fields[e.raw] = v
		}
	}
	d.attrsSent = true
	req.Attributes = map[string]*structpb.Struct{FilterName: s}
}

// headersToProto imitates MutationUtils::headersToProto: lower-case keys, values in
// raw_value, pseudo-headers included, forward_rules applied.
func (f *Filter) headersToProto(h *stream.Headers) *corev3.HeaderMap {
	out := &corev3.HeaderMap{}
	for _, e := range h.All() {
		if f.cfg.headerCanBeForwarded(e.Key) {
			out.Headers = append(out.Headers, &corev3.HeaderValue{Key: e.Key, RawValue: []byte(e.Value)})
		}
	}
	return out
}

// buildHeaderRequest imitates Filter::buildHeaderRequest.
func (f *Filter) buildHeaderRequest(d *direction, h *stream.Headers, end bool) *extprocv3.ProcessingRequest {
	req := &extprocv3.ProcessingRequest{}
	f.addAttributes(d, req)
	f.addDynamicMetadata(req)
	hh := &extprocv3.HttpHeaders{Headers: f.headersToProto(h), EndOfStream: end}
	if d.inbound {
		req.Request = &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hh}
	} else {
		req.Request = &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: hh}
	}
	f.encodeProtocolConfig(req)
	return req
}

// setupBodyChunk imitates Filter::setupBodyChunk.
func (f *Filter) setupBodyChunk(d *direction, b []byte, end bool) *extprocv3.ProcessingRequest {
	req := &extprocv3.ProcessingRequest{}
	f.addAttributes(d, req)
	f.addDynamicMetadata(req)
	hb := &extprocv3.HttpBody{Body: append([]byte(nil), b...), EndOfStream: end}
	if d.inbound {
		req.Request = &extprocv3.ProcessingRequest_RequestBody{RequestBody: hb}
	} else {
		req.Request = &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: hb}
	}
	f.encodeProtocolConfig(req)
	return req
}

// sendBodyChunk imitates Filter::sendBodyChunk.
func (f *Filter) sendBodyChunk(d *direction, next cbState, req *extprocv3.ProcessingRequest) {
	d.startCall(next)
	f.send(req)
}

// sendTrailers imitates Filter::sendTrailers.
func (f *Filter) sendTrailers(d *direction) {
	if d.trailersToServer {
		return
	}
	d.trailersToServer = true
	req := &extprocv3.ProcessingRequest{}
	f.addAttributes(d, req)
	f.addDynamicMetadata(req)
	ht := &extprocv3.HttpTrailers{Trailers: f.headersToProto(d.trailers)}
	if d.inbound {
		req.Request = &extprocv3.ProcessingRequest_RequestTrailers{RequestTrailers: ht}
	} else {
		req.Request = &extprocv3.ProcessingRequest_ResponseTrailers{ResponseTrailers: ht}
	}
	next := d.cb
	if next == cbIdle {
		next = cbTrailers
	}
	d.startCall(next)
	f.encodeProtocolConfig(req)
	f.send(req)
}

// failureModeAllow imitates Filter::failureModeAllow: no fail-open once a
// FULL_DUPLEX_STREAMED direction handed body bytes to the server.
func (f *Filter) failureModeAllow() bool {
	if (f.dec.bodyMode == epv3.ProcessingMode_FULL_DUPLEX_STREAMED && f.dec.bodyReceived) ||
		(f.enc.bodyMode == epv3.ProcessingMode_FULL_DUPLEX_STREAMED && f.enc.bodyReceived) {
		return false
	}
	return f.cfg.Proto.GetFailureModeAllow()
}

// onGrpcEvent imitates the stream callbacks of ExternalProcessorStreamImpl
// (client_impl.cc): a message → onReceiveMessage, remote close with OK → onGrpcClose,
// an error status → onGrpcError.
func (f *Filter) onGrpcEvent(ev grpcEvent) {
	if ev.gen != f.grpcGen || f.grpcStream == nil {
		return // a stream this filter already closed
	}
	switch {
	case ev.err == nil:
		f.onReceiveMessage(ev.resp)
	case errors.Is(ev.err, io.EOF):
		// The server closed the stream with OK (onGrpcClose).
		f.onGrpcClose()
	default:
		s := status.Convert(ev.err)
		f.onGrpcError(s.Code(), s.Message())
	}
}

// onGrpcError imitates Filter::onGrpcError: fail open with failure_mode_allow, else a
// local reply with status_on_error.
func (f *Filter) onGrpcError(code codes.Code, msg string) {
	f.log.Debug("ext_proc gRPC error", "code", code, "msg", msg)
	if f.processingComplete {
		return
	}
	if f.failureModeAllow() {
		f.onGrpcClose()
		return
	}
	f.processingComplete = true
	f.finishCalls()
	f.closeStream()
	f.sendImmediateResponse(&extprocv3.ImmediateResponse{
		Status:  statusCode(f.cfg.StatusOnError),
		Details: fmt.Sprintf("ext_proc_error_gRPC_error_%d{%s}", int(code), msg),
	})
}

// onGrpcClose imitates Filter::onGrpcCloseWithStatus: continue without the server.
func (f *Filter) onGrpcClose() {
	if f.processingComplete {
		return
	}
	f.processingComplete = true
	f.closeStream()
	f.clearAsyncState()
}

// onMessageTimeout imitates Filter::onMessageTimeout: 504 or fail-open.
func (f *Filter) onMessageTimeout() {
	f.log.Debug("ext_proc message timeout")
	if f.failureModeAllow() {
		f.processingComplete = true
		f.closeStream()
		f.clearAsyncState()
		return
	}
	f.processingComplete = true
	f.closeStream()
	f.finishCalls()
	f.sendImmediateResponse(&extprocv3.ImmediateResponse{
		Status:  statusCode(504),
		Details: "ext_proc_error_per-message_timeout_exceeded",
	})
}

// onNewTimeout imitates Filter::onNewTimeout (override_message_timeout): honoured
// once per processing state, between 1 ms and max_message_timeout.
func (f *Filter) onNewTimeout(d time.Duration) {
	if d < time.Millisecond || d > f.cfg.MaxMessageTimeout {
		f.log.Debug("ext_proc override_message_timeout ignored: out of range", "timeout", d)
		return
	}
	if !f.dec.restartTimer(d) && !f.enc.restartTimer(d) {
		f.log.Debug("ext_proc override_message_timeout ignored: no timer or already overridden")
	}
}

func (f *Filter) finishCalls() {
	f.dec.finishCall(cbIdle)
	f.enc.finishCall(cbIdle)
}

// clearAsyncState imitates Filter::clearAsyncState / ProcessorState::clearAsyncState:
// re-inject queued chunks and continue both directions.
func (f *Filter) clearAsyncState() {
	for _, d := range []*direction{f.dec, f.enc} {
		d.finishCall(cbIdle)
		if len(d.queue) > 0 {
			var all []byte
			end := d.queue[len(d.queue)-1].end
			for _, c := range d.queue {
				all = append(all, c.data...)
			}
			d.queue = nil
			d.emitData(all, end)
		}
		d.continueIfNecessary()
	}
}

// handleErrorResponse imitates Filter::handleErrorResponse.
func (f *Filter) handleErrorResponse(err error) {
	f.processingComplete = true
	f.finishCalls()
	f.closeStream()
	f.sendImmediateResponse(&extprocv3.ImmediateResponse{
		Status:  statusCode(f.cfg.StatusOnError),
		Details: err.Error(),
	})
}

// sendImmediateResponse imitates Filter::sendImmediateResponse: status < 200 or unset
// → 200; header mutations checked with the filter's mutation_rules; details have
// whitespace replaced (StringUtil::replaceAllEmptySpace); grpc_status passed on for
// gRPC requests.
//
// In an upstream (cluster) filter it returns at once and counts
// send_immediate_resp_upstream_ignored: this covers an ImmediateResponse from the
// processor and every error reply of the filter itself (onMessageTimeout,
// onGrpcError, the error branch of onReceiveMessage, all without
// failure_mode_allow). The callers have already marked processing complete and
// closed the gRPC stream; nothing resumes the held request or response, so the
// client waits for a router timeout (per-try or route).
func (f *Filter) sendImmediateResponse(ir *extprocv3.ImmediateResponse) {
	if f.cb.IsUpstream() {
		f.cb.Inc("ext_proc.send_immediate_resp_upstream_ignored")
		f.log.Debug("Ignoring send immediate response when ext_proc filter is in upstream")
		return
	}
	code := 200
	if ir.GetStatus() != nil {
		code = int(ir.GetStatus().GetCode())
	}
	if code < 200 {
		code = 200
	}
	mut := ir.GetHeaders()
	var grpcStatus *uint32
	if ir.GetGrpcStatus() != nil {
		v := ir.GetGrpcStatus().GetStatus()
		grpcStatus = &v
	}
	reply := &stream.LocalReply{
		Status:     code,
		GrpcStatus: grpcStatus,
		Body:       string(ir.GetBody()),
		Details:    strings.Join(strings.Fields(ir.GetDetails()), "_"),
		Mutate: func(h *stream.Headers) {
			if mut == nil {
				return
			}
			if err := applyHeaderMutations(mut, h, false, f.cfg.checker, false); err != nil {
				f.log.Error("Immediate response mutations failed", "err", err)
			}
		},
	}
	f.replied = true
	f.encOut.Push(stream.LocalReplyFrame(reply))
}

// inHeaderProcessState imitates Filter::inHeaderProcessState (mode_override is only
// honoured while a headers response is expected).
func (f *Filter) inHeaderProcessState() bool {
	return f.dec.cb == cbHeaders || f.enc.cb == cbHeaders
}

// setDynamicMetadata imitates Filter::setDynamicMetadata: only receiving namespaces.
func (f *Filter) setDynamicMetadata(resp *extprocv3.ProcessingResponse) {
	if len(f.cfg.receiveNS) == 0 || resp.GetDynamicMetadata() == nil {
		return
	}
	for ns, v := range resp.GetDynamicMetadata().GetFields() {
		for _, allowed := range f.cfg.receiveNS {
			if ns == allowed && v.GetStructValue() != nil {
				f.cb.DynamicMetadata().Merge(ns, v.GetStructValue())
			}
		}
	}
}
