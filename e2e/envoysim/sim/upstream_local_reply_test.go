package sim_test

import (
	"net/http"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/switchyard-gw/switchyard/internal/testnet"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const upstreamIgnored = "ext_proc.send_immediate_resp_upstream_ignored"

func immediate(code typev3.StatusCode, body string) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
		Status: &typev3.HttpStatus{Code: code}, Body: []byte(body),
	}}}
}

// pending asserts that the client has no response yet.
func pending(t *testing.T, res <-chan result) {
	t.Helper()
	select {
	case r := <-res:
		t.Fatalf("client already answered: %+v %q", r.resp, r.body)
	default:
	}
}

// An ImmediateResponse from an upstream (cluster) ext_proc is ignored: Envoy's
// Filter::sendImmediateResponse returns at once in upstream mode and counts
// send_immediate_resp_upstream_ignored. The gRPC stream is closed at once and the
// held request headers are never released, so the client gets the route timeout.
func TestUpstreamImmediateResponseIgnored(t *testing.T) {
	ps := newProcServer(t)
	a := newUpstream(t, nil)
	up := extProcYAML("attempt", "request_header_mode: SEND, response_header_mode: SKIP")
	e := start(t, cfg{procAddr: ps.addr,
		route:    `timeout: 0.5s`,
		clusters: []string{clusterYAML("a", upstreamFiltersYAML(up), []string{endpointYAML(a.addr(), "")})},
	})
	res := e.do("GET", "/", "", "X-Cluster", "a")
	st := ps.next(t, "attempt")
	st.Recv(t)
	st.Send(t, immediate(typev3.StatusCode_ServiceUnavailable, "final"))
	if err := st.WaitEnd(t); grpcCode(err) != "Canceled" {
		t.Fatalf("stream end %v", err)
	}
	pending(t, res)
	r := await(t, res)
	mustOK(t, r, 504)
	if r.body != "upstream request timeout" {
		t.Fatalf("body %q", r.body)
	}
	if l := e.nextLog(); l.ResponseCodeDetails != "response_timeout" || !contains(l.ResponseFlags, "UT") || l.Attempts != 1 {
		t.Fatalf("access log %+v", l)
	}
	if n := e.s.Counter(upstreamIgnored); n != 1 {
		t.Fatalf("%s = %d", upstreamIgnored, n)
	}
	a.none(t)
	ps.none(t, "attempt")
}

// On the response path the held response headers never reach the router: nothing
// is committed, and the route timeout answers 504 although the upstream answered.
func TestUpstreamImmediateResponseOnResponseIgnored(t *testing.T) {
	ps := newProcServer(t)
	a := newUpstream(t, nil)
	up := extProcYAML("attempt", "request_header_mode: SKIP, response_header_mode: SEND")
	e := start(t, cfg{procAddr: ps.addr,
		route:    `timeout: 0.5s`,
		clusters: []string{clusterYAML("a", upstreamFiltersYAML(up), []string{endpointYAML(a.addr(), "")})},
	})
	res := e.do("GET", "/", "", "X-Cluster", "a")
	st := ps.next(t, "attempt")
	if h := hdrs(st.Recv(t)); h[":status"] != "200" {
		t.Fatalf("response headers %v", h)
	}
	a.next(t)
	st.Send(t, immediate(typev3.StatusCode_BadGateway, "replaced"))
	if err := st.WaitEnd(t); grpcCode(err) != "Canceled" {
		t.Fatalf("stream end %v", err)
	}
	pending(t, res)
	r := await(t, res)
	mustOK(t, r, 504)
	if n := e.s.Counter(upstreamIgnored); n != 1 {
		t.Fatalf("%s = %d", upstreamIgnored, n)
	}
}

// With a per-try timeout the ignored reply costs one try: the attempt is reset at
// the per-try timeout and retried, with a new upstream filter chain (and stream).
func TestUpstreamImmediateResponseIgnoredUntilPerTryTimeout(t *testing.T) {
	ps := newProcServer(t)
	a := newUpstream(t, nil)
	up := extProcYAML("attempt", "request_header_mode: SEND, response_header_mode: SKIP")
	e := start(t, cfg{procAddr: ps.addr, hcm: []string{"internal_address_config: {}"}, // internal requests keep x-envoy-* headers
		route:    `timeout: 5s, retry_policy: {retry_on: "reset", num_retries: 1, retry_back_off: {base_interval: 0.001s}}`,
		clusters: []string{clusterYAML("a", upstreamFiltersYAML(up), []string{endpointYAML(a.addr(), "")})},
	})
	res := e.do("GET", "/", "", "X-Cluster", "a", "x-forwarded-for", "10.0.0.1", "x-envoy-upstream-rq-per-try-timeout-ms", "300")
	st := ps.next(t, "attempt")
	st.Recv(t)
	st.Send(t, immediate(typev3.StatusCode_Forbidden, "denied"))
	st2 := ps.next(t, "attempt")
	if got := hdrs(st2.Recv(t))["x-envoy-attempt-count"]; got != "2" {
		t.Fatalf("second attempt count %q", got)
	}
	st2.Send(t, reqHeadersResp(nil))
	r := await(t, res)
	mustOK(t, r, 200)
	a.next(t)
	if l := e.nextLog(); l.Attempts != 2 || !contains(l.ResponseFlags, "UT") {
		t.Fatalf("access log %+v", l)
	}
	if n := e.s.Counter(upstreamIgnored); n != 1 {
		t.Fatalf("%s = %d", upstreamIgnored, n)
	}
}

// The filter's own error replies go through sendImmediateResponse too: in upstream
// mode (without failure_mode_allow) a message timeout (onMessageTimeout), a gRPC
// error (onGrpcError) or a rejected header mutation (the error branch of
// onReceiveMessage) close the stream, mark processing complete and hold the request
// until the route timeout. failure_mode_allow fails open on a timeout or gRPC
// error (clearAsyncState resumes the request), never on a rejected mutation.
func TestUpstreamExtProcErrorsHoldRequest(t *testing.T) {
	cases := []struct {
		name     string
		extra    []string
		fail     func(t *testing.T, st *procStream)
		wantCode int
		wantEnd  string // gRPC code the server sees, "" = not checked
	}{
		{"message timeout", []string{"message_timeout: 0.05s"}, func(*testing.T, *procStream) {}, 504, "Canceled"},
		{"gRPC error", nil, func(_ *testing.T, st *procStream) { st.Close(status.Error(codes.Internal, "boom")) }, 504, ""},
		{"rejected mutation", []string{"mutation_rules: {disallow_is_error: true}"}, func(t *testing.T, st *procStream) {
			st.Send(t, reqHeadersResp(common(setHeaders("x-envoy-forbidden", "1"))))
		}, 504, "Canceled"},
		{"message timeout, failure_mode_allow", []string{"message_timeout: 0.05s", "failure_mode_allow: true"}, func(*testing.T, *procStream) {}, 200, "Canceled"},
		{"gRPC error, failure_mode_allow", []string{"failure_mode_allow: true"}, func(_ *testing.T, st *procStream) { st.Close(status.Error(codes.Internal, "boom")) }, 200, ""},
		{"rejected mutation, failure_mode_allow", []string{"mutation_rules: {disallow_is_error: true}", "failure_mode_allow: true"}, func(t *testing.T, st *procStream) {
			st.Send(t, reqHeadersResp(common(setHeaders("x-envoy-forbidden", "1"))))
		}, 504, "Canceled"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps := newProcServer(t)
			a := newUpstream(t, nil)
			up := extProcYAML("attempt", "request_header_mode: SEND, response_header_mode: SKIP", c.extra...)
			e := start(t, cfg{procAddr: ps.addr,
				route:    `timeout: 0.6s`,
				clusters: []string{clusterYAML("a", upstreamFiltersYAML(up), []string{endpointYAML(a.addr(), "")})},
			})
			res := e.do("GET", "/", "", "X-Cluster", "a")
			st := ps.next(t, "attempt")
			st.Recv(t)
			c.fail(t, st)
			if c.wantEnd != "" {
				if err := st.WaitEnd(t); grpcCode(err) != c.wantEnd {
					t.Fatalf("stream end %v", err)
				}
			}
			r := await(t, res)
			mustOK(t, r, c.wantCode)
			want := uint64(0)
			if c.wantCode == 504 {
				want = 1
				if l := e.nextLog(); l.ResponseCodeDetails != "response_timeout" {
					t.Fatalf("access log %+v", l)
				}
				a.none(t)
			} else {
				a.next(t)
			}
			if n := e.s.Counter(upstreamIgnored); n != want {
				t.Fatalf("%s = %d, want %d", upstreamIgnored, n, want)
			}
		})
	}
}

// FULL_DUPLEX_STREAMED: once body chunks went to the processor there is no
// fail-open (Filter::failureModeAllow, envoy PR #41276): a gRPC error then is a
// fail-closed error reply, ignored upstream, so the request hangs until the route
// timeout. Before any body was sent, failure_mode_allow still fails open.
func TestUpstreamFullDuplexNoFailOpenAfterBody(t *testing.T) {
	mode := "request_header_mode: SEND, request_body_mode: FULL_DUPLEX_STREAMED, request_trailer_mode: SEND, response_header_mode: SKIP"
	ps := newProcServer(t)
	a := newUpstream(t, nil)
	up := extProcYAML("attempt", mode, "failure_mode_allow: true")
	e := start(t, cfg{procAddr: ps.addr,
		route:    `timeout: 0.6s`,
		clusters: []string{clusterYAML("a", upstreamFiltersYAML(up), []string{endpointYAML(a.addr(), "")})},
	})

	res := e.do("POST", "/", "chunk", "X-Cluster", "a")
	st := ps.next(t, "attempt")
	st.Recv(t) // request_headers
	if b := st.Recv(t).GetRequestBody(); string(b.GetBody()) != "chunk" {
		t.Fatalf("body message %v", b)
	}
	st.Close(status.Error(codes.Internal, "boom"))
	mustOK(t, await(t, res), 504)
	a.none(t)
	if n := e.s.Counter(upstreamIgnored); n != 1 {
		t.Fatalf("%s = %d", upstreamIgnored, n)
	}

	res = e.do("GET", "/", "", "X-Cluster", "a")
	st = ps.next(t, "attempt")
	st.Recv(t)
	st.Close(status.Error(codes.Internal, "boom"))
	r := await(t, res)
	mustOK(t, r, http.StatusOK)
	a.next(t)
	if n := e.s.Counter(upstreamIgnored); n != 1 {
		t.Fatalf("%s = %d after the fail-open request", upstreamIgnored, n)
	}
}

// An unreachable processor fails the stream after it was started (Envoy's async
// client reports the connect failure through onRemoteClose → onGrpcError): upstream
// that error reply is ignored too and the request waits for the route timeout;
// with failure_mode_allow it goes on unprocessed. Downstream it is the
// status_on_error local reply.
func TestUnreachableProcessor(t *testing.T) {
	dead := testnet.DeadAddress(t)
	for _, c := range []struct {
		name     string
		upstream bool
		extra    []string
		want     int
		ignored  uint64
	}{
		{"upstream", true, nil, 504, 1},
		{"upstream, failure_mode_allow", true, []string{"failure_mode_allow: true"}, 200, 0},
		{"downstream", false, nil, 500, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newUpstream(t, nil)
			f := extProcYAML("r", "request_header_mode: SEND, response_header_mode: SKIP", c.extra...)
			conf := cfg{procAddr: dead, route: "timeout: 0.5s"}
			if c.upstream {
				conf.clusters = []string{clusterYAML("a", upstreamFiltersYAML(f), []string{endpointYAML(a.addr(), "")})}
			} else {
				conf.filters = []string{f}
				conf.clusters = []string{clusterYAML("a", "", []string{endpointYAML(a.addr(), "")})}
			}
			e := start(t, conf)
			mustOK(t, await(t, e.do("GET", "/", "", "X-Cluster", "a")), c.want)
			if c.want == 200 {
				a.next(t)
			} else {
				a.none(t)
			}
			if n := e.s.Counter(upstreamIgnored); n != c.ignored {
				t.Fatalf("%s = %d, want %d", upstreamIgnored, n, c.ignored)
			}
		})
	}
}
