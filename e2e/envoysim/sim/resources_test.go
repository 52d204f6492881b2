package sim_test

import (
	"net/http"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// A cluster's max_requests: a request past it fails with the pool's overflow, which the
// router answers 503 (flag UO) and never retries, even to another priority; the upstream
// never sees it. The slot comes back when the active request ends.
func TestMaxRequestsOverflowIsNotRetried(t *testing.T) {
	release := make(chan struct{})
	busy := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ *recorded) {
		if r.URL.Path == "/hold" {
			<-release
		}
		_, _ = w.Write([]byte("ok"))
	})
	p1 := newUpstream(t, nil)
	e := start(t, cfg{
		route: `retry_policy: {retry_on: "connect-failure,reset,refused-stream", num_retries: 1, ` + previousPriorities + `}`,
		clusters: []string{clusterYAML("dep", `circuit_breakers: {thresholds: [{max_requests: 1}]}`,
			[]string{endpointYAML(busy.addr(), "")}, []string{endpointYAML(p1.addr(), "")})},
	})
	held := e.do("GET", "/hold", "", "X-Cluster", "dep")
	busy.next(t)
	r := await(t, e.do("GET", "/second", "", "X-Cluster", "dep"))
	mustOK(t, r, 503)
	if want := "upstream connect error or disconnect/reset before headers. reset reason: overflow"; r.body != want {
		t.Fatalf("body %q, want %q", r.body, want)
	}
	if l := e.nextLog(); len(l.ResponseFlags) == 0 || l.ResponseFlags[0] != "UO" || l.Attempts != 1 {
		t.Fatalf("access log flags %v attempts %d, want UO after one attempt", l.ResponseFlags, l.Attempts)
	}
	busy.none(t)
	p1.none(t)
	close(release)
	mustOK(t, await(t, held), 200)
	e.nextLog()
	mustOK(t, await(t, e.do("GET", "/third", "", "X-Cluster", "dep")), 200)
}

// An envoy_grpc cluster's max_requests bounds the ext_proc streams open on it: a filter
// whose stream the cluster refuses sees a gRPC error (UNAVAILABLE) and, without
// failure_mode_allow, answers with status_on_error.
func TestGRPCClusterMaxRequestsRefusesStreams(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{
		procAddr:    ps.addr,
		procCluster: `circuit_breakers: {thresholds: [{max_requests: 1}]}`,
		filters:     []string{extProcYAML("r", "request_header_mode: SEND, response_header_mode: SKIP", "status_on_error: {code: 503}")},
		clusters:    []string{ca},
	})
	first := e.do("GET", "/first", "", "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	r := await(t, e.do("GET", "/second", "", "X-Cluster", "a"))
	mustOK(t, r, 503)
	if l := e.nextLog(); l.ResponseCodeDetails != "ext_proc_error_gRPC_error_14{upstream_connect_error_or_disconnect/reset_before_headers._reset_reason:_overflow}" {
		t.Fatalf("details %q", l.ResponseCodeDetails)
	}
	ps.none(t, "r")
	st.Send(t, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}}})
	mustOK(t, await(t, first), 200)
	a.next(t)
	e.nextLog()
	// The first stream ended with its request: a third gets a stream again.
	third := e.do("GET", "/third", "", "X-Cluster", "a")
	st = ps.next(t, "r")
	st.Recv(t)
	st.Send(t, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}}})
	mustOK(t, await(t, third), 200)
}
