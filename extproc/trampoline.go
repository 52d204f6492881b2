package extproc

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

// TrampolinePath is where the attempt role of a trampoline attempt sends the request.
const TrampolinePath = "/switchyard/trampoline"

// The trampoline is the priority-1 endpoint of every deployment cluster (docs/design.md). When a
// provider attempt fails below HTTP — connection refused, a reset or a per-try timeout before
// response headers — Envoy retries it here (retry_on connect-failure,reset,refused-stream
// with previous_priorities). The trampoline attempt's attempt role forwards the pass's state
// and what it knows of the failure; the trampoline records the transient failure and answers
// the same 307 an HTTP failure gets, so transport failures fail over like any other.

// Trampoline returns the trampoline's HTTP handler.
func (s *Server) Trampoline() http.Handler {
	return http.HandlerFunc(s.serveTrampoline)
}

func (s *Server) serveTrampoline(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != TrampolinePath {
		// A request that reached the trampoline without the attempt role's rewrite: the
		// attempt role was unreachable and the filter failed open.
		s.log.Warn("trampoline: request without the attempt role's rewrite (attempt role unavailable?)", "request", r.Header.Get(headerRequestID))
		gatewayUnavailable(w)
		return
	}
	requestID := r.Header.Get(headerRequestID)
	st, err := s.sealer.Open(r.Header.Get(contract.HeaderState), requestID)
	if err != nil {
		s.metric.stateRejected(RejectionReason(err))
		s.log.Warn("trampoline: attempt state rejected", "request", requestID, "reason", string(RejectionReason(err)))
		gatewayUnavailable(w)
		return
	}
	cur := st.GetCurrent()
	var dep *config.Deployment
	if snap := s.router.Config(); snap != nil {
		dep = snap.Deployments[cur.GetDeploymentId()]
	}
	req, err := requestOf(st)
	if dep == nil || err != nil {
		s.log.Error("trampoline: state names no known deployment", "request", requestID, "deployment", cur.GetDeploymentId())
		http.Error(w, "switchyard trampoline: unknown deployment", http.StatusBadGateway)
		return
	}
	transport := failure.TransportReset
	if n, err := strconv.Atoi(r.Header.Get(HeaderTransport)); err == nil {
		transport = failure.Transport(n)
	}
	now := s.clock.Now()
	c := failure.Classify(failure.Outcome{Provider: dep.Provider, Transport: transport}, now)
	latency := now.Sub(time.Unix(0, cur.GetStartUnixNano()))
	res := routing.Result{Classification: c, Latency: latency, Started: time.Unix(0, cur.GetStartUnixNano()), Reserved: reservedOf(cur)}
	// A detached context: the bookkeeping must happen even if Envoy gave up on this attempt.
	t := s.finishAttempt(context.WithoutCancel(r.Context()), requestID, &req, dep, cur.GetAttemptId(), res)
	s.log.Info("attempt failed", "request", requestID, "deployment", dep.ID, "model", cur.GetModel(), "class", c.Class.String(),
		"kind", string(c.Kind), "latency_ms", latency.Milliseconds(), "circuit", transitionName(t), "via", "trampoline",
		"time_left_ms", time.Unix(0, st.GetDeadlineUnixNano()).Sub(now).Milliseconds())
	if err := recordAttempt(st, dep, c, latency); err != nil {
		s.log.Error("trampoline: recording the attempt in the state failed", "request", requestID, "err", err)
		http.Error(w, "switchyard trampoline: internal error", http.StatusBadGateway)
		return
	}
	sealed, err := s.sealer.Seal(st)
	if err != nil {
		s.log.Error("trampoline: sealing the attempt state failed", "request", requestID, "err", err)
		http.Error(w, "switchyard trampoline: internal error", http.StatusBadGateway)
		return
	}
	w.Header().Set("Location", originalURL(st))
	w.Header().Set(contract.HeaderState, sealed)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusTemporaryRedirect)
}

// gatewayUnavailable is the trampoline's answer when it cannot turn a transport failure into
// a failover: a 502 that the OpenAI and Anthropic SDKs both read as an API error.
func gatewayUnavailable(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadGateway)
	_, _ = w.Write([]byte(`{"type":"error","error":{"type":"api_error","code":"gateway_unavailable","message":"The gateway could not complete the request: the upstream failed and switchyard's attempt processor was unavailable."}}`))
}
