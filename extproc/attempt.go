package extproc

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/extproc/provider"
	"github.com/switchyard-gw/switchyard/extproc/stream"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// The attempt role is the upstream ext_proc filter of every deployment cluster (request
// headers SEND, request body BUFFERED, response headers SEND, response body
// FULL_DUPLEX_STREAMED, trailers SEND). Envoy opens one stream per attempt, so the stream's
// life is the attempt's life: it starts the attempt, rewrites the request for the provider,
// holds and classifies the response, and either lets it through or turns it into the 307
// that re-enters the route role. It never answers ImmediateResponse: Envoy ignores it from an
// upstream filter (ext_proc.cc sendImmediateResponse) and the client would hang.

type attemptPhase uint8

const (
	attemptAwaitRequestHeaders attemptPhase = iota
	attemptAwaitRequestBody
	attemptAwaitResponseHeaders
	// attemptHold: response headers held while the body is read and classified.
	attemptHold
	// attemptPass: headers released; body chunks pass on as they come.
	attemptPass
	attemptDone
)

func (p attemptPhase) String() string {
	switch p {
	case attemptAwaitRequestHeaders:
		return "await_request_headers"
	case attemptAwaitRequestBody:
		return "await_request_body"
	case attemptAwaitResponseHeaders:
		return "await_response_headers"
	case attemptHold:
		return "hold"
	case attemptPass:
		return "pass"
	default:
		return "done"
	}
}

type attemptProcessor struct {
	s      *Server
	stream extprocv3.ExternalProcessor_ProcessServer
	// mu is held while a message or a timer is handled (run, watchTimer); everything
	// below is read and written under it.
	mu     sync.Mutex
	phase  attemptPhase
	closed bool // the stream ended (end)
	// timerKick tells the timer watcher that the stream's timer changed; nil until a
	// streamed response arms its first timer (watchTimer).
	timerKick chan struct{}

	requestID string
	state     *attemptstate.State
	// cur is the attempt under way, as the state names it (set when the state opened).
	cur      attemptstate.Current
	sealedIn string // the state as it came in dynamic metadata
	req      routing.Request
	// snap is the configuration the attempt started under: dep and every setting the
	// attempt reads come from it, so a reload during the attempt cannot mix two.
	snap       *config.Snapshot
	dep        *config.Deployment
	trampoline bool
	// broken is why the attempt cannot be made (no or bad state, a cluster mismatch); the
	// request then goes out stripped and its answer becomes a gateway error.
	broken error
	// started: StartAttempt ran, so FinishAttempt must run exactly once.
	started, finished bool
	startedAt, sentAt time.Time
	unified           bool
	transport         failure.Transport // what the trampoline attempt knows of the failure

	// sse follows a streamed response (attempt_stream.go); clientUsage: the client asked
	// for its stream's usage itself.
	sse         *streamState
	clientUsage bool

	// streamed is the reused streamed_response answer, streamedBody its chunk (sendStreamed).
	streamed     *extprocv3.ProcessingResponse
	streamedBody *extprocv3.StreamedBodyResponse

	status  int
	headers headerMap
	held    []byte
	// overHold: a failed response's body passed the hold bound; only its head is kept.
	overHold bool
	// redact: the configured and the client's credentials, built at the first failure.
	redact *failure.Secrets
}

func newAttemptProcessor(s *Server, stream extprocv3.ExternalProcessor_ProcessServer) *attemptProcessor {
	return &attemptProcessor{s: s, stream: stream}
}

// run reads Envoy's messages on the stream's own goroutine and handles each under p.mu.
// The only other goroutine that touches the processor is a streamed response's timer
// watcher (watchTimer), which takes p.mu too: a chunk costs a lock, not a hand-off between
// goroutines.
func (p *attemptProcessor) run() error {
	ctx := p.stream.Context()
	defer p.end()
	for {
		req, err := p.stream.Recv()
		if err != nil {
			return err
		}
		p.mu.Lock()
		err = p.handle(ctx, req)
		p.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// handle processes one message from Envoy; p.mu is held.
func (p *attemptProcessor) handle(ctx context.Context, req *extprocv3.ProcessingRequest) (err error) {
	began := p.s.clock.Now()
	var kind messageKind
	switch r := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		kind = msgRequestHeaders
		if p.phase != attemptAwaitRequestHeaders {
			return errUnexpected(contract.RoleAttempt, p.phase, req)
		}
		err = p.onRequestHeaders(ctx, req)
	case *extprocv3.ProcessingRequest_RequestBody:
		kind = msgRequestBody
		if p.phase != attemptAwaitRequestBody {
			return errUnexpected(contract.RoleAttempt, p.phase, req)
		}
		err = p.onRequestBody(r.RequestBody)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		kind = msgRequestTrailers
		err = p.stream.Send(continueRequestTrailers())
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		kind = msgResponseHeaders
		if p.phase != attemptAwaitResponseHeaders {
			return errUnexpected(contract.RoleAttempt, p.phase, req)
		}
		err = p.onResponseHeaders(ctx, r.ResponseHeaders)
	case *extprocv3.ProcessingRequest_ResponseBody:
		kind = msgResponseBody
		err = p.onResponseBody(ctx, r.ResponseBody)
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		kind = msgResponseTrailers
		err = p.onResponseTrailers(ctx)
	default:
		return errUnexpected(contract.RoleAttempt, p.phase, req)
	}
	p.kickTimer()
	p.s.metric.observeMessage(roleAttempt, kind, p.s.clock.Now().Sub(began))
	return err
}

// end settles the processor when its stream ends: the timer watcher stops and an attempt
// still open is released.
func (p *attemptProcessor) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.timerKick != nil {
		close(p.timerKick)
	}
	p.release()
}

// send hands one answer to Envoy.
func (p *attemptProcessor) send(r *extprocv3.ProcessingResponse) error { return p.stream.Send(r) }

// sendStreamed hands Envoy the next streamed_response chunk of the response body. The answer
// is built once per stream and refilled: gRPC marshals a message within SendMsg and this
// server installs no stats handler that could read it later, so a chunk costs no answer
// allocation.
func (p *attemptProcessor) sendStreamed(b []byte, endOfStream bool) error {
	if p.streamed == nil {
		p.streamed = streamedBody(nil, false)
		p.streamedBody = p.streamed.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse()
	}
	p.streamedBody.Body, p.streamedBody.EndOfStream = b, endOfStream
	err := p.send(p.streamed)
	p.streamedBody.Body = nil // the chunk's bytes are not kept past its answer
	return err
}

func (p *attemptProcessor) onRequestHeaders(ctx context.Context, m *extprocv3.ProcessingRequest) error {
	h := m.GetRequestHeaders()
	hm := headerMap{h.GetHeaders()}
	p.requestID = hm.value(headerRequestID)
	p.unified = hm.value(HeaderRoutingMetadata) == "true"
	p.trampoline = isTrampoline(m)
	p.phase = attemptAwaitRequestBody
	if h.GetEndOfStream() {
		p.broken = fmt.Errorf("request without a body")
	}
	if err := p.load(m); err != nil && p.broken == nil {
		p.broken = err
	}
	if p.broken != nil {
		p.s.log.Error("attempt cannot be made", "request", p.requestID, "trampoline", p.trampoline, "err", p.broken)
	} else if !p.trampoline {
		p.startedAt = p.s.clock.Now()
		// The reservation (behaviour §4.1) is settled by the attempt's outcome.
		if err := p.s.router.StartAttempt(ctx, p.dep, p.cur.ID, p.state.Deadline(), p.cur.Reserved); err != nil {
			p.s.log.Warn("recording the attempt start failed", "request", p.requestID, "deployment", p.dep.ID, "err", err)
		}
		p.started = true
	}
	if h.GetEndOfStream() {
		p.phase = attemptAwaitResponseHeaders
		return p.stream.Send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
			RequestHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{HeaderMutation: p.safe(strippedRequest(hm, nil)).proto()}},
		}})
	}
	p.headers = hm
	return p.stream.Send(continueRequestHeaders())
}

// load opens the state of this pass from dynamic metadata and checks it against the cluster
// the attempt runs in.
func (p *attemptProcessor) load(m *extprocv3.ProcessingRequest) error {
	sealed := passState(m)
	if sealed == "" {
		return fmt.Errorf("no attempt state in request attribute %s or dynamic metadata namespace %q", contract.AttributeState, contract.MetadataNamespace)
	}
	st, err := p.s.sealer.Open(sealed, p.requestID)
	if err != nil {
		return fmt.Errorf("opening the attempt state: %w", err)
	}
	p.state, p.sealedIn = st, sealed
	cur, ok := st.Current()
	if !ok {
		return fmt.Errorf("attempt state names no current attempt")
	}
	p.cur = cur
	if cluster := attribute(m.GetAttributes(), contract.AttributeClusterName).GetStringValue(); cluster != contract.ClusterName(cur.Deployment) {
		return fmt.Errorf("state is for deployment %q but the attempt runs in cluster %q", cur.Deployment, cluster)
	}
	snap := p.s.router.Config()
	if snap == nil || snap.Deployments[cur.Deployment] == nil {
		return fmt.Errorf("deployment %q is not configured", cur.Deployment)
	}
	p.snap, p.dep = snap, snap.Deployments[cur.Deployment]
	if p.req, err = st.Request(); err != nil {
		return err
	}
	if p.trampoline {
		p.transport = transportGuess(m, cur.Started, p.s.clock.Now(), p.responseTimeout())
	}
	return nil
}

// responseTimeout is the per-try timeout the route role gave this attempt.
func (p *attemptProcessor) responseTimeout() time.Duration {
	return p.dep.Policy(&p.snap.Settings, p.req.Operation, p.req.Mode()).Response
}

func isTrampoline(m *extprocv3.ProcessingRequest) bool {
	return truthy(attribute(m.GetAttributes(), contract.AttributeTrampoline))
}

// transportGuess is what the trampoline attempt can tell of the provider attempt's failure:
// no request went out (a connect failure), the per-try timeout fired, or the connection was
// reset before response headers. Envoy does not say which; the provider attempt's metadata
// mark and the elapsed time do.
func transportGuess(m *extprocv3.ProcessingRequest, started, now time.Time, perTry time.Duration) failure.Transport {
	if !requestSent(m) {
		return failure.TransportConnect
	}
	if now.Sub(started) >= perTry-perTry/20 {
		return failure.TransportTimeout
	}
	return failure.TransportReset
}

func (p *attemptProcessor) onRequestBody(b *extprocv3.HttpBody) error {
	p.phase = attemptAwaitResponseHeaders
	switch {
	case p.broken != nil:
		return p.stream.Send(rewriteRequest(p.safe(strippedRequest(p.headers, []byte{})), []byte{}, nil))
	case p.trampoline:
		m := strippedRequest(p.headers, []byte{})
		m.setHeader(":path", TrampolinePath)
		m.setHeader(":method", http.MethodPost)
		m.setHeader(contract.HeaderState, p.sealedIn) // the pass's state, as the route role sealed it
		m.setHeader(HeaderTransport, strconv.Itoa(int(p.transport)))
		return p.stream.Send(rewriteRequest(p.safe(m), []byte{}, nil))
	}
	rw, err := p.rewrite(b.GetBody())
	if err != nil {
		p.broken = err
		p.s.log.Error("rewriting the request for the provider failed", "request", p.requestID, "deployment", p.dep.ID, "err", err)
		return p.stream.Send(rewriteRequest(p.safe(strippedRequest(p.headers, []byte{})), []byte{}, nil))
	}
	m := providerMutation(p.headers, rw)
	p.sentAt = p.s.clock.Now()
	return p.stream.Send(rewriteRequest(p.safe(m), rw.Body, sentMetadata()))
}

// strippedRequest removes every credential and switchyard header from a request, and sets
// content-length for a replaced body (nil keeps the length).
func strippedRequest(h headerMap, body []byte) mutation {
	m := stripped(h, switchyardPrefix)
	if body != nil {
		m.setHeader("content-length", strconv.Itoa(len(body)))
	}
	return m
}

// rewrite is the provider's request for body (extproc/provider).
func (p *attemptProcessor) rewrite(body []byte) (provider.Rewrite, error) {
	up, err := p.s.upstreams.get(p.snap, p.dep)
	if err != nil {
		return provider.Rewrite{}, err
	}
	d := p.state.Dialect()
	if p.req.Stream && d == dialect.Chat { // only a Chat stream's usage chunk depends on it
		p.clientUsage = dialect.StreamUsageAsked(body)
	}
	return up.Rewrite(provider.Input{
		// Ask every Chat stream for its usage (TPM, throughput); the usage chunk is removed
		// again when the client did not ask for it.
		Dialect: d, Stream: p.req.Stream, Body: body, IncludeUsage: true,
		HeaderNames: p.headers.names(), AnthropicVersion: p.headers.value("anthropic-version"),
	})
}

// providerMutation is the header mutation that sends the request to the provider: the
// provider's path, authority and credentials, the client's credentials and switchyard's
// headers removed, content-length matching the body.
func providerMutation(h headerMap, rw provider.Rewrite) mutation {
	var m mutation
	for _, name := range rw.Remove {
		if _, ok := h.raw(name); ok {
			m.removeHeader(name)
		}
	}
	m.setHeader(":path", rw.Path)
	m.setHeader(":authority", rw.Authority)
	m.set = append(m.set, rw.Set...)
	return m
}

func (p *attemptProcessor) onResponseHeaders(ctx context.Context, h *extprocv3.HttpHeaders) error {
	p.headers = headerMap{h.GetHeaders()}
	p.status, _ = strconv.Atoi(p.headers.value(":status"))
	if p.trampoline || p.state == nil {
		// The trampoline's 307 (or, without a state, whatever came back) goes on as it is.
		return p.releaseHeaders(h.GetEndOfStream())
	}
	if h.GetEndOfStream() {
		return p.decide(ctx, false, true)
	}
	if p.broken == nil && p.req.Stream && p.status < 300 {
		p.startStream()
		return nil
	}
	p.phase = attemptHold
	return nil
}

// releaseHeaders lets the response headers through and passes the body on.
func (p *attemptProcessor) releaseHeaders(endOfStream bool) error {
	p.phase = attemptPass
	if endOfStream {
		p.phase = attemptDone
		p.finishSuccess(0, 0)
	}
	if p.trampoline {
		return p.stream.Send(continueResponseHeaders(mutation{}))
	}
	return p.stream.Send(continueResponseHeaders(p.clientHeaders()))
}

// clientHeaders is the mutation that releases the provider's response headers to the client
// (responseheaders.go).
func (p *attemptProcessor) clientHeaders() mutation {
	family := dialect.OpenAI
	if p.state != nil {
		family = p.clientFamily()
	}
	return p.safe(clientResponse(p.headers, p.requestID, family))
}

func (p *attemptProcessor) onResponseBody(ctx context.Context, b *extprocv3.HttpBody) error {
	if p.sse != nil {
		return p.onStreamBody(b.GetBody(), b.GetEndOfStream())
	}
	switch p.phase {
	case attemptHold:
		if !p.overHold {
			p.held = append(p.held, b.GetBody()...)
		}
		if len(p.held) > p.s.opts.MaxResponseHold && !p.overHold {
			if p.status < 300 && p.broken == nil {
				// Too large to hold: it passes through unmodified (behaviour §8.1 for large bodies).
				if err := p.stream.Send(continueResponseHeaders(p.clientHeaders())); err != nil {
					return err
				}
				p.phase = attemptPass
				held := p.held
				p.held = nil
				return p.pass(held, b.GetEndOfStream())
			}
			p.overHold = true
			p.held = p.held[:p.s.opts.MaxResponseHold]
		}
		if b.GetEndOfStream() {
			return p.decide(ctx, true, true)
		}
		return nil
	case attemptPass:
		return p.pass(b.GetBody(), b.GetEndOfStream())
	}
	return fmt.Errorf("attempt role: response body in phase %s", p.phase)
}

// pass hands body bytes on; the end of the body ends the attempt as a success.
func (p *attemptProcessor) pass(b []byte, endOfStream bool) error {
	if endOfStream {
		p.phase = attemptDone
		p.finishSuccess(0, 0)
	}
	return p.sendStreamed(b, endOfStream)
}

func (p *attemptProcessor) onResponseTrailers(ctx context.Context) error {
	if p.sse != nil {
		// Trailers end a streamed body as its end_of_stream would.
		if err := p.onStreamBody(nil, true); err != nil {
			return err
		}
		return p.stream.Send(continueResponseTrailers())
	}
	switch p.phase {
	case attemptHold:
		if err := p.decide(ctx, true, false); err != nil {
			return err
		}
	case attemptPass:
		p.phase = attemptDone
		p.finishSuccess(0, 0)
	}
	return p.stream.Send(continueResponseTrailers())
}

// decide classifies the held response: a success goes to the client (with the
// unified_routing object when asked for), a failure becomes the 307 back to the route role.
// hadBody: Envoy sent body messages, so the answer must end the body; endOfStream: the body
// ends here (not with trailers).
func (p *attemptProcessor) decide(ctx context.Context, hadBody, endOfStream bool) error {
	now := p.s.clock.Now()
	p.phase = attemptDone
	c := failure.Classification{Class: failure.ClassGateway, Status: http.StatusInternalServerError, Message: "internal gateway error"}
	if p.broken == nil {
		o := failure.Outcome{Provider: p.dep.Provider, Status: p.status, Body: p.held}
		if !o.Succeeded() {
			o.Header, o.Secrets = p.headers.httpHeader(), p.secrets()
		}
		c = failure.Classify(o, now)
	}
	latency := now.Sub(p.sentAt)
	if c.Class == failure.ClassNone {
		u := stream.UsageOf(p.state.Dialect(), p.held)
		p.finishSuccess(u.Completion, u.Total)
		body := withPublicModel(p.held, p.cur.Model)
		if p.unified {
			body = withUnifiedRouting(body, p.unifiedRouting(latency.Milliseconds()))
		}
		if err := p.stream.Send(continueResponseHeaders(p.clientHeaders())); err != nil {
			return err
		}
		if !hadBody {
			return nil
		}
		return p.stream.Send(streamedBody(body, endOfStream))
	}
	return p.redirect(c, latency, hadBody, viaAttempt)
}

// redirect ends the failed attempt (its outcome in the router, the log and the state) and
// sends the 307 that re-enters the route role.
func (p *attemptProcessor) redirect(c failure.Classification, latency time.Duration, hadBody bool, how via) error {
	t := p.finish(routing.Result{Classification: c, Latency: latency})
	f := failedAttempt{requestID: p.requestID, state: p.state, status: p.status, class: c, latency: latency, circuit: t, via: how}
	if p.broken == nil {
		f.providerRequestID = p.providerRequestID()
	}
	m, err := p.s.failover(p.stream.Context(), f)
	if err != nil {
		return err
	}
	if err := p.stream.Send(continueResponseHeaders(p.safe(m))); err != nil {
		return err
	}
	if !hadBody {
		return nil
	}
	// Envoy holds the 307 until the processor ends the body it drained
	// (FULL_DUPLEX_STREAMED: handleDuplexStreamedBodyResponse).
	return p.stream.Send(streamedBody(nil, true))
}

func (p *attemptProcessor) finishSuccess(completion, total int64) {
	p.finishServed(p.s.clock.Now().Sub(p.sentAt), completion, total)
}

// finishServed finishes a successful attempt that took latency and writes the request's one
// closing record (a stop is logged by the route role); extra adds the stream's fields.
func (p *attemptProcessor) finishServed(latency time.Duration, completion, total int64, extra ...slog.Attr) {
	if !p.started || p.finished {
		return
	}
	t := p.finish(routing.Result{Classification: failure.Classification{Class: failure.ClassNone, Status: p.status},
		Latency: latency, CompletionTokens: completion, TotalTokens: total})
	cur, public := p.cur, p.state.PublicModel()
	attrs := append(make([]slog.Attr, 0, 12+len(extra)), slog.String("request", p.requestID),
		slog.String("model", public), slog.String("served_model", cur.Model),
		slog.String("deployment", cur.Deployment), slog.Int("status", p.status),
		slog.Int("attempts", p.state.Attempts()+1), slog.Bool("fallback_used", cur.Model != public),
		slog.Int64("latency_ms", latency.Milliseconds()), slog.Int64("completion_tokens", completion),
		slog.String("circuit", transitionName(t)),
		slog.Int64("total_ms", p.s.clock.Now().Sub(p.state.Start()).Milliseconds()),
		skippedAttr(p.state.Skips()))
	attrs = append(attrs, extra...)
	p.s.log.LogAttrs(p.stream.Context(), slog.LevelInfo, "request served", attrs...)
	p.s.metric.requestServed(public)
}

// finish records the attempt's outcome once.
func (p *attemptProcessor) finish(res routing.Result) store.Transition {
	if !p.started || p.finished {
		return store.Transition{}
	}
	p.finished = true
	res.Started, res.Reserved = p.startedAt, p.cur.Reserved
	return p.s.finishAttempt(context.Background(), p.requestID, &p.req, p.dep, p.cur.ID, res)
}

// transitionName names what an outcome did to the circuits, for the route reason (behaviour §10.2).
func transitionName(t store.Transition) string {
	switch {
	case t.Quarantined:
		return "quarantined"
	case t.Opened:
		return "opened"
	case t.Reopened:
		return "reopened"
	case t.Closed:
		return "closed"
	case t.CapacityOpened:
		return "rate_limited"
	}
	return "unchanged"
}

// release ends an attempt that ended without a verdict: Envoy cancelled the stream (client
// cancel, an upstream reset or connect failure, which the trampoline records) — the
// in-flight entry goes and nothing else is recorded.
func (p *attemptProcessor) release() {
	p.finish(routing.Result{Classification: failure.Classification{Class: failure.ClassGateway, Status: 499}})
}

// secrets are the credentials no provider text may carry to the client or the log: every
// configured deployment's key and the client's own (failure.Secrets).
func (p *attemptProcessor) secrets() *failure.Secrets {
	if p.redact == nil {
		var base *failure.Secrets
		if p.snap != nil {
			base = p.s.secrets.get(p.snap, p.s.log)
		}
		p.redact = base.With(clientSecrets(p.state)...)
	}
	return p.redact
}

// safe drops what Envoy's mutation_rules would refuse (see mutationcheck.go) and says so.
func (p *attemptProcessor) safe(m mutation) mutation {
	out, dropped := attemptRules.sanitize(m)
	if len(dropped) > 0 {
		p.s.log.Error("header mutation entries Envoy would refuse were dropped", "request", p.requestID, "role", contract.RoleAttempt, "dropped", dropped)
	}
	return out
}
