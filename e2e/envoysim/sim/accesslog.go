package sim

import (
	"context"
	"log/slog"
	"slices"
)

// AccessLogEntry describes one finished downstream stream, with the fields of Envoy's
// access log that tests assert on (docs/root/configuration/observability/access_log/usage.rst:
// %RESPONSE_CODE%, %RESPONSE_FLAGS%, %RESPONSE_CODE_DETAILS%, %UPSTREAM_CLUSTER%,
// %UPSTREAM_HOST%, %UPSTREAM_REQUEST_ATTEMPT_COUNT%).
type AccessLogEntry struct {
	Listener  string
	Method    string
	Authority string
	Path      string
	RequestID string
	// ResponseCode is 0 when no response was sent (internal redirect, reset, client gone).
	ResponseCode int
	// ResponseFlags are Envoy's short flags: UH no healthy upstream, UF upstream
	// connection failure, UC upstream connection termination, UR upstream remote reset,
	// UT upstream request timeout, URX retry limit exceeded, UO overflow, NR no route,
	// NC no cluster, LR local reset, SI stream idle timeout.
	ResponseFlags       []string
	ResponseCodeDetails string
	UpstreamCluster     string
	UpstreamHost        string
	Attempts            int
	// InternalRedirect: this pass ended in an internal redirect (a new stream follows).
	InternalRedirect bool
	// DownstreamReset: envoysim reset the client stream (a local reply after the
	// response headers were sent).
	DownstreamReset bool
}

func (s *Sim) logAccess(h *hcmConfig, st *activeStream, res passResult, out *downstreamWriter) {
	if s.opts.accessLog == nil && !s.log.Enabled(context.Background(), slog.LevelDebug) {
		return // nobody reads the entry (the load driver's case): build none per pass
	}
	st.mu.Lock()
	e := AccessLogEntry{
		Listener:            h.listener,
		Method:              st.headers.Value(":method"),
		Authority:           st.headers.Value(":authority"),
		Path:                st.headers.Value(":path"),
		RequestID:           st.headers.Value("x-request-id"),
		ResponseFlags:       slices.Clone(st.info.flags),
		ResponseCodeDetails: st.info.details,
		UpstreamCluster:     st.info.clusterName,
		UpstreamHost:        st.info.upstreamHost,
		Attempts:            int(st.info.attemptCount),
		InternalRedirect:    res.redirect != nil,
		DownstreamReset:     res.reset,
	}
	st.mu.Unlock()
	if out.headersSent && res.redirect == nil {
		e.ResponseCode = out.status
	}
	s.log.Debug("access", "listener", e.Listener, "method", e.Method, "path", e.Path, "code", e.ResponseCode,
		"flags", e.ResponseFlags, "details", e.ResponseCodeDetails, "cluster", e.UpstreamCluster,
		"host", e.UpstreamHost, "attempts", e.Attempts)
	if s.opts.accessLog != nil {
		s.opts.accessLog(e)
	}
}
