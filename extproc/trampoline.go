package extproc

import (
	"context"
	"net/http"
	"strconv"

	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
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
		s.metric.stateRejected(attemptstate.RejectionReason(err))
		s.log.Warn("trampoline: attempt state rejected", "request", requestID, "reason", string(attemptstate.RejectionReason(err)))
		gatewayUnavailable(w)
		return
	}
	cur, _ := st.Current()
	var dep *config.Deployment
	if snap := s.router.Config(); snap != nil {
		dep = snap.Deployments[cur.Deployment]
	}
	req, err := st.Request()
	if dep == nil || err != nil {
		s.log.Error("trampoline: state names no known deployment", "request", requestID, "deployment", cur.Deployment)
		http.Error(w, "switchyard trampoline: unknown deployment", http.StatusBadGateway)
		return
	}
	transport := failure.TransportReset
	if n, err := strconv.Atoi(r.Header.Get(HeaderTransport)); err == nil {
		transport = failure.Transport(n)
	}
	now := s.clock.Now()
	c := failure.Classify(failure.Outcome{Provider: dep.Provider, Transport: transport}, now)
	latency := now.Sub(cur.Started)
	res := routing.Result{Classification: c, Latency: latency, Started: cur.Started, Reserved: cur.Reserved}
	// A detached context: the bookkeeping must happen even if Envoy gave up on this attempt.
	ctx := context.WithoutCancel(r.Context())
	t := s.finishAttempt(ctx, requestID, &req, dep, cur.ID, res)
	m, err := s.failover(ctx, failedAttempt{requestID: requestID, state: st, class: c, latency: latency, circuit: t, via: viaTrampoline})
	if err != nil {
		s.log.Error("trampoline: failing over failed", "request", requestID, "err", err)
		http.Error(w, "switchyard trampoline: internal error", http.StatusBadGateway)
		return
	}
	writeRedirect(w, m)
}

// gatewayUnavailable is the trampoline's answer when it cannot turn a transport failure into
// a failover: a 502 that the OpenAI and Anthropic SDKs both read as an API error.
func gatewayUnavailable(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadGateway)
	_, _ = w.Write([]byte(`{"type":"error","error":{"type":"api_error","code":"gateway_unavailable","message":"The gateway could not complete the request: the upstream failed and switchyard's attempt processor was unavailable."}}`))
}
