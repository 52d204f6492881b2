package extproc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/extproc/provider"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
)

// The route role is the downstream (HCM) ext_proc filter: request headers SEND, request body
// BUFFERED, no response processing. Every pass of a request through Envoy — the first, and
// each re-entry by internal redirect — runs one route processor, which answers the request
// itself (a stop, a model listing, a bad request) or sends it to a deployment's cluster.

type routePhase uint8

const (
	routeAwaitHeaders routePhase = iota
	routeAwaitBody
	routeDone
)

func (p routePhase) String() string {
	switch p {
	case routeAwaitHeaders:
		return "await_headers"
	case routeAwaitBody:
		return "await_body"
	default:
		return "done"
	}
}

type routeProcessor struct {
	s      *Server
	stream extprocv3.ExternalProcessor_ProcessServer
	phase  routePhase

	route     dialect.Route
	headers   headerMap
	requestID string
	// state is the request's state: opened from x-switchyard-state on re-entry, new on a
	// first pass (built when the body arrives).
	state   *attemptstate.State
	reentry bool
}

func newRouteProcessor(s *Server, stream extprocv3.ExternalProcessor_ProcessServer) *routeProcessor {
	return &routeProcessor{s: s, stream: stream}
}

func (p *routeProcessor) run() error {
	ctx := p.stream.Context()
	for {
		// No reader goroutine: the only wait (a backoff) watches the stream's context,
		// which gRPC cancels when Envoy resets the stream.
		req, err := p.stream.Recv()
		if err != nil {
			return err
		}
		began := p.s.clock.Now()
		switch r := req.GetRequest().(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			if p.phase != routeAwaitHeaders {
				return errUnexpected(contract.RoleRoute, p.phase, req)
			}
			err = p.onRequestHeaders(r.RequestHeaders)
			p.s.metric.observeMessage(roleRoute, msgRequestHeaders, p.s.clock.Now().Sub(began))
		case *extprocv3.ProcessingRequest_RequestBody:
			if p.phase != routeAwaitBody {
				return errUnexpected(contract.RoleRoute, p.phase, req)
			}
			err = p.onRequestBody(ctx, r.RequestBody)
		case *extprocv3.ProcessingRequest_RequestTrailers:
			err = p.stream.Send(continueRequestTrailers())
		default:
			return errUnexpected(contract.RoleRoute, p.phase, req)
		}
		if err != nil {
			return err
		}
		if p.phase == routeDone {
			// Close the stream with OK once the last answer is out: Envoy keeps a BUFFERED
			// route filter's stream open until the request ends (ext_proc.cc
			// isLastBodyResponse skips the close optimisation for BUFFERED), and a replica
			// that dies later would fail the request with status_on_error; after an OK
			// close Envoy goes on without the processor (onGrpcClose).
			return nil
		}
	}
}

func (p *routeProcessor) onRequestHeaders(h *extprocv3.HttpHeaders) error {
	p.headers = headerMap{h.GetHeaders()}
	p.requestID = p.headers.value(headerRequestID)
	if p.requestID == "" {
		p.requestID = newRequestID()
	}
	_, anthropic := p.headers.get("anthropic-version")
	route, err := dialect.Match(p.headers.value(":method"), p.headers.value(":path"), anthropic)
	if err != nil {
		p.phase = routeDone
		return p.replyError(err)
	}
	p.route = route
	p.openState()
	switch route.Op {
	case dialect.OpListModels, dialect.OpGetModel:
		p.phase = routeDone
		models, de := p.authorize(p.stream.Context(), route.ModelID)
		if de != nil {
			return p.replyError(de)
		}
		return p.stream.Send(p.models(models))
	}
	if de := p.missingKey(); de != nil {
		p.phase = routeDone
		return p.replyError(de)
	}
	if de := p.checkLength(); de != nil {
		p.phase = routeDone
		return p.replyError(de)
	}
	if h.GetEndOfStream() {
		p.phase = routeDone
		return p.replyError(&dialect.Error{Family: route.Family, Status: http.StatusBadRequest, Code: dialect.CodeInvalidJSON, Message: "The request has no body."})
	}
	p.phase = routeAwaitBody
	return p.stream.Send(continueRequestHeaders())
}

// checkLength answers a declared content-length over MaxRequestBody with the dialect's 413
// before Envoy buffers the body: past its buffer limit Envoy itself would answer 413 (its
// local reply, shaped by the HCM's local_reply_config). A chunked body is checked when it
// arrives (Parse).
func (p *routeProcessor) checkLength() error {
	v, ok := p.headers.get("content-length")
	if !ok {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return nil // Envoy's codec refuses a malformed content-length before any filter runs
	}
	return dialect.Parser{MaxBodyBytes: p.s.opts.MaxRequestBody}.CheckLength(p.route.Dialect, n)
}

// openState verifies a state the request carries. Only a 307 of an attempt role puts one
// there; anything else (a client's forgery, garbage, another request's or an expired state)
// is counted, stripped with the other x-switchyard-* headers, and the request is new.
func (p *routeProcessor) openState() {
	sealed, ok := p.headers.get(contract.HeaderState)
	if !ok {
		return
	}
	st, err := p.s.sealer.Open(sealed, p.requestID)
	if err != nil {
		p.s.metric.stateRejected(attemptstate.RejectionReason(err))
		p.s.log.Warn("attempt state rejected; the request is treated as new", "request", p.requestID, "reason", string(attemptstate.RejectionReason(err)))
		return
	}
	p.state, p.reentry = st, true
	st.Redirect()
}

func (p *routeProcessor) onRequestBody(ctx context.Context, b *extprocv3.HttpBody) error {
	p.phase = routeDone
	parsed, err := dialect.Parser{MaxBodyBytes: p.s.opts.MaxRequestBody}.Parse(p.route.Dialect, b.GetBody())
	if err != nil {
		return p.replyError(err)
	}
	snap := p.s.router.Config()
	if snap == nil || snap.Groups[parsed.Model] == nil {
		return p.replyError(dialect.ModelNotFound(p.route.Family, parsed.Model))
	}
	if p.state != nil && p.state.PublicModel() != parsed.Model {
		// A state for another model is not this request's: start over, as a first pass.
		p.state, p.reentry = nil, false
	}
	var allowed []string
	if p.state == nil {
		var de *dialect.Error
		if allowed, de = p.authorize(ctx, parsed.Model); de != nil {
			return p.replyError(de)
		}
	}
	now := p.s.clock.Now()
	if p.state == nil {
		p.state = p.newState(snap, parsed, now)
		// The key's allow-list travels with the request: its fallbacks on every later pass
		// stay within it.
		p.state.SetAllowedModels(allowed)
	}
	req, err := p.state.Request()
	if err != nil {
		return p.replyGatewayError(err)
	}
	req.Facts = parsed.Facts
	hist, err := p.state.History()
	if err != nil {
		return p.replyGatewayError(err)
	}
	if p.state.Redirects() >= p.s.opts.MaxRedirects {
		// Defensive: maxAttempts is validated against the redirect budget, so the router
		// stops first; a 307 must never reach the client.
		return p.replyStop(req, hist, hist.FinalStop())
	}
	d := p.s.router.Decide(ctx, &req, hist)
	p.s.metric.skipped(req.Model, d.Skips)
	if d.Action == routing.ActionStop {
		hist.Skip(d.Skips) // for the record
		return p.replyStop(req, hist, d.Stop)
	}
	if d.Wait > 0 {
		p.s.log.Info("waiting before the next attempt", "request", p.requestID, "deployment", d.Deployment.ID,
			"wait_ms", d.Wait.Milliseconds(), "move", d.Move.String())
		if err := p.stream.Send(announceWait(d.Wait + p.s.opts.WaitMargin)); err != nil {
			p.s.router.Unreserve(ctx, &d)
			return err
		}
		select {
		case <-ctx.Done():
			// behaviour §12.3: the client went away during the wait; nothing was started.
			p.s.log.Info("request cancelled during a retry wait", "request", p.requestID, "deployment", d.Deployment.ID)
			p.s.router.Unreserve(ctx, &d)
			return ctx.Err()
		case <-p.s.clock.After(d.Wait):
		}
		now = p.s.clock.Now()
	}
	return p.sendAttempt(&req, hist, &d, now)
}

// newState starts the state of a new logical request and saves the client's headers that
// the attempt roles overwrite or the route role removes.
func (p *routeProcessor) newState(snap *config.Snapshot, parsed dialect.Request, now time.Time) *attemptstate.State {
	req := routing.Request{ID: p.requestID, Model: parsed.Model, Operation: parsed.Operation, Stream: parsed.Stream, Start: now}
	total := snap.Settings.Policy(req.Operation, req.Mode()).Total
	st := attemptstate.New(&req, p.route.Dialect, now.Add(total))
	// Only what the client sent: a saved header is restored on re-entry, any other one an
	// attempt role added is removed again (absent and unsaved mean the same).
	for _, name := range savedHeaders {
		if v, ok := p.headers.raw(name); ok {
			st.SaveHeader(name, v, true)
		}
	}
	for _, name := range [...]string{":scheme", ":authority", ":path"} {
		v, ok := p.headers.raw(name)
		st.SaveHeader(name, v, ok)
	}
	return st
}

// sendAttempt answers the body with the move to deployment d.
func (p *routeProcessor) sendAttempt(req *routing.Request, hist *routing.History, d *routing.Decision, now time.Time) error {
	attemptID := p.requestID + "/" + strconv.Itoa(len(hist.Attempts)+1) + "/" + shortRandom()
	p.state.Begin(d, attemptID, now)
	sealed, err := p.s.sealer.Seal(p.state)
	if err != nil {
		p.s.router.Unreserve(p.stream.Context(), d)
		return p.replyGatewayError(err)
	}
	deadline := p.state.Deadline()
	m := attemptHeaders(p.headers, p.state, d.Deployment.ID, deadline.Sub(now), d.ResponseTimeout)
	// Typed attributes: every request pays this record, and Info's ...any boxes each value.
	p.s.log.LogAttrs(p.stream.Context(), slog.LevelInfo, "attempt scheduled", slog.String("request", p.requestID),
		slog.String("model", req.Model), slog.String("deployment", d.Deployment.ID), slog.String("move", d.Move.String()),
		slog.String("reason", d.Reason.String()), slog.Int64("wait_ms", d.Wait.Milliseconds()), slog.Bool("probe", d.Probe),
		slog.Int64("time_left_ms", deadline.Sub(now).Milliseconds()), slog.Int("attempt", len(hist.Attempts)+1),
		slog.Bool("degraded", d.Degraded))
	p.s.metric.moved(req.Model, d.Move)
	m, dropped := routeRules.sanitize(m)
	if len(dropped) > 0 {
		p.s.log.Error("header mutation entries Envoy would refuse were dropped", "request", p.requestID, "role", contract.RoleRoute, "dropped", dropped)
	}
	return p.stream.Send(routeAttempt(m, sealed))
}

// attemptHeaders is the header mutation of the route role's move to a deployment: the
// client's x-envoy-* and x-switchyard-* headers go (an Envoy without use_remote_address
// trusts them), so do the client's credentials (they travel sealed), the client's original
// headers come back on re-entry, and the cluster header and Envoy's per-attempt timeouts are
// set.
func attemptHeaders(h headerMap, st *attemptstate.State, deploymentID string, left, perTry time.Duration) mutation {
	m := stripped(h, envoyPrefix, switchyardPrefix)
	for _, name := range savedHeaders {
		if provider.IsClientCredential(name) {
			continue
		}
		v, present, _ := st.SavedHeader(name)
		cur, now := h.raw(name)
		switch {
		case present && (!now || !bytes.Equal(cur, v)):
			// Only what an attempt role changed: on a first pass nothing is.
			m.setHeader(name, string(v))
		case !present && now:
			m.removeHeader(name)
		}
	}
	m.setHeader(contract.HeaderCluster, contract.ClusterName(deploymentID))
	m.setHeader(headerTimeout, strconv.FormatInt(ceilMillis(left), 10))
	m.setHeader(headerPerTryTimeout, strconv.FormatInt(ceilMillis(min(perTry, left)), 10))
	return m
}

func ceilMillis(d time.Duration) int64 {
	if d <= 0 {
		return 1
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

func (p *routeProcessor) replyStop(req routing.Request, hist *routing.History, stop *routing.StopError) error {
	p.s.log.Info("request stopped", "request", p.requestID, "model", req.Model, "status", stop.Status, "code", stop.Code,
		"kind", string(stop.Kind), "retry_after_ms", stop.RetryAfter.Milliseconds(), "attempts", len(hist.Attempts),
		"upstream", stop.Upstream, skippedAttr(hist.Skips))
	p.s.metric.requestStopped(req.Model, stop)
	return p.replyError(dialect.FromStop(p.route.Family, stop))
}

func (p *routeProcessor) replyGatewayError(err error) error {
	p.s.log.Error("route role failed", "request", p.requestID, "err", err)
	return p.replyError(internalError(p.route.Family))
}

// replyError answers the client with err in its dialect.
func (p *routeProcessor) replyError(err error) error {
	var de *dialect.Error
	if !errors.As(err, &de) {
		p.s.log.Error("route role failed", "request", p.requestID, "err", err)
		de = internalError(p.route.Family)
	}
	return p.stream.Send(renderedReply(de.Render(p.requestID), "switchyard_"+de.Code))
}

// models answers GET /v1/models and GET /v1/models/{id} from the configuration; allowed is
// the client key's allow-list (empty: every model), and the listing holds only what the key
// may use.
func (p *routeProcessor) models(allowed []string) *extprocv3.ProcessingResponse {
	snap := p.s.router.Config()
	names := slices.DeleteFunc(snap.Models(), func(name string) bool { return len(allowed) > 0 && !slices.Contains(allowed, name) })
	created := time.Unix(0, 0)
	if p.route.Op == dialect.OpGetModel {
		if snap == nil || snap.Groups[p.route.ModelID] == nil {
			return renderedReply(dialect.ModelNotFound(p.route.Family, p.route.ModelID).Render(p.requestID), "switchyard_model_not_found")
		}
		return renderedReply(dialect.ModelResponse(p.route.Family, p.route.ModelID, created), "switchyard_model")
	}
	return renderedReply(dialect.ModelsResponse(p.route.Family, names, created), "switchyard_models")
}

// renderedReply is the local reply of a rendered answer.
func renderedReply(r dialect.Response, details string) *extprocv3.ProcessingResponse {
	return localReply(r.Status, r.Headers, r.Body, details)
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// shortRandom tells apart attempt ids of one request made by different replicas or passes;
// it needs uniqueness, not secrecy, so the runtime's generator does (crypto/rand cost more
// than the rest of the attempt id).
func shortRandom() string {
	return strconv.FormatUint(uint64(mrand.Uint32()), 36)
}

// internalError is the client's answer when switchyard itself failed.
func internalError(f dialect.Family) *dialect.Error {
	return &dialect.Error{Family: f, Status: http.StatusInternalServerError, Code: "internal_error", Message: "The gateway failed to process the request."}
}
