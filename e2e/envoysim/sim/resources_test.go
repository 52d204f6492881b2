package sim_test

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// A cluster's max_requests: a request past it fails with the pool's overflow, which the
// router answers 503 (flag UO) and never retries, even to another priority; the upstream
// never sees it. The slot comes back when the active request ends. Of two DEFAULT
// thresholds the first applies (circuit_breaker.proto).
func TestMaxRequestsOverflowIsNotRetried(t *testing.T) {
	release := make(chan struct{})
	busy := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ *recorded) {
		if r.URL.Path == "/hold" {
			<-release
		}
		_, _ = w.Write([]byte("ok"))
	})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the upstream closes, which waits for its handlers
	p1 := newUpstream(t, nil)
	e := start(t, cfg{
		route: `retry_policy: {retry_on: "connect-failure,reset,refused-stream", num_retries: 1, ` + previousPriorities + `}`,
		clusters: []string{clusterYAML("dep", `circuit_breakers: {thresholds: [{max_requests: 1}, {max_requests: 100}]}`,
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
	unblock()
	mustOK(t, await(t, held), 200)
	e.nextLog()
	mustOK(t, await(t, e.do("GET", "/third", "", "X-Cluster", "dep")), 200)
}

// max_pending_requests: a request whose connection is still being made (here a TLS handshake
// that never completes) is pending; one more past the limit overflows at once, 503 UO,
// while the first waits for its connect_timeout.
func TestMaxPendingRequestsOverflow(t *testing.T) {
	caPEM, _ := testCA(t, "api.test")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		for len(accepted) > 0 {
			_ = (<-accepted).Close()
		}
	})
	cl := strings.Replace(clusterYAML("slow", `circuit_breakers: {thresholds: [{max_pending_requests: 1}]}, `+tlsSocketYAML(caPEM),
		[]string{endpointYAML(ln.Addr().String(), "")}), "connect_timeout: 2s", "connect_timeout: 0.5s", 1)
	e := start(t, cfg{clusters: []string{cl}})
	first := e.do("GET", "/first", "", "X-Cluster", "slow")
	select {
	case c := <-accepted: // the first request's connection is being made: it is pending
		accepted <- c
	case <-time.After(wait):
		t.Fatal("the first request never connected")
	}
	r := await(t, e.do("GET", "/second", "", "X-Cluster", "slow"))
	mustOK(t, r, 503)
	if want := "upstream connect error or disconnect/reset before headers. reset reason: overflow"; r.body != want {
		t.Fatalf("body %q, want %q", r.body, want)
	}
	if l := e.nextLog(); len(l.ResponseFlags) == 0 || l.ResponseFlags[0] != "UO" {
		t.Fatalf("access log flags %v, want UO", l.ResponseFlags)
	}
	r = await(t, first)
	mustOK(t, r, 503)
	if want := "upstream connect error or disconnect/reset before headers. reset reason: connection timeout"; r.body != want {
		t.Fatalf("first: body %q, want %q", r.body, want)
	}
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
