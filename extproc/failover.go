package extproc

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// A failover is how every failed attempt re-enters the route role, whether the attempt role
// saw the failure (an HTTP error, a stream that failed before its commit) or the trampoline
// did (a transport failure): the outcome goes into the state, the state is sealed again, and
// a 307 to the client's own URL carries it back (docs/design.md, "Attempt state"; docs/extproc.md, "The sealed state").

// failedAttempt is what a failover records and logs of the attempt under way.
type failedAttempt struct {
	requestID string
	state     *attemptstate.State
	status    int // the provider's, 0 for a transport failure
	class     failure.Classification
	latency   time.Duration
	circuit   store.Transition
	// providerRequestID is the provider's id of its answer ("" without one).
	providerRequestID string
	via               via
}

// via says where a failure was seen, for the log.
type via string

const (
	viaAttempt    via = "attempt"    // the attempt role, in a held response
	viaStream     via = "stream"     // the attempt role, in a stream before its commit
	viaTrampoline via = "trampoline" // the trampoline: a transport failure
)

// failover logs the failed attempt once, records it in the state and returns the 307 that
// re-enters the route role.
func (s *Server) failover(ctx context.Context, f failedAttempt) (mutation, error) {
	a, err := f.state.Finish(f.class, f.latency, f.providerRequestID)
	if err != nil {
		return mutation{}, fmt.Errorf("recording the attempt in the state: %w", err)
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "attempt failed", slog.String("request", f.requestID),
		slog.String("deployment", a.Deployment), slog.String("model", a.Model), slog.Int("status", f.status),
		slog.String("class", f.class.Class.String()), slog.String("kind", string(f.class.Kind)),
		slog.Int64("retry_after_ms", f.class.RetryAfter.Milliseconds()), slog.Int64("latency_ms", f.latency.Milliseconds()),
		slog.String("circuit", transitionName(f.circuit)), slog.Int64("time_left_ms", f.state.Deadline().Sub(s.clock.Now()).Milliseconds()),
		slog.String("provider_request_id", f.providerRequestID), slog.String("via", string(f.via)))
	sealed, err := s.sealer.Seal(f.state)
	if err != nil {
		return mutation{}, fmt.Errorf("sealing the attempt state: %w", err)
	}
	return redirectMutation(f.state.OriginalURL(), sealed), nil
}

// writeRedirect writes the 307 of m as an HTTP answer (the trampoline's).
func writeRedirect(w http.ResponseWriter, m mutation) {
	for _, h := range m.set {
		if h.Name != ":status" {
			w.Header().Set(h.Name, h.Value)
		}
	}
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusTemporaryRedirect)
}
