package sim_test

import (
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// message_timeout without an answer → 504 local reply, stream cancelled
// (ext_proc.cc onMessageTimeout).
func TestMessageTimeoutIs504(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, response_header_mode: SKIP", "message_timeout: 0.2s")}, clusters: []string{ca}})
	res := e.do("GET", "/", "", "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	r := await(t, res)
	mustOK(t, r, 504)
	if err := st.WaitEnd(t); grpcCode(err) != "Canceled" {
		t.Fatalf("stream end %v", err)
	}
	if l := e.nextLog(); l.ResponseCodeDetails != "ext_proc_error_per-message_timeout_exceeded" {
		t.Fatalf("details %q", l.ResponseCodeDetails)
	}
	a.none(t)
}

// override_message_timeout extends the timer once per state, within
// max_message_timeout; all other fields of that response are ignored.
func TestOverrideMessageTimeout(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, response_header_mode: SKIP",
		"message_timeout: 0.2s", "max_message_timeout: 10s")}, clusters: []string{ca}})
	res := e.do("GET", "/", "", "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	ext := reqHeadersResp(common(setHeaders("x-ignored", "1")))
	ext.OverrideMessageTimeout = durationpb.New(5 * time.Second)
	st.Send(t, ext)
	// Well past the original 200 ms: the extended timer must still be running.
	time.Sleep(600 * time.Millisecond)
	st.Send(t, reqHeadersResp(common(setHeaders("x-late", "1"))))
	mustOK(t, await(t, res), 200)
	got := a.next(t)
	if got.Header.Get("X-Late") != "1" || got.Header.Get("X-Ignored") != "" {
		t.Fatalf("upstream headers %v", got.Header)
	}
}

// An override above max_message_timeout is ignored: the original timer fires.
func TestOverrideMessageTimeoutAboveMaxIgnored(t *testing.T) {
	ps := newProcServer(t)
	_, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, response_header_mode: SKIP",
		"message_timeout: 0.2s", "max_message_timeout: 1s")}, clusters: []string{ca}})
	res := e.do("GET", "/", "", "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	ext := &extprocv3.ProcessingResponse{OverrideMessageTimeout: durationpb.New(5 * time.Second)}
	st.Send(t, ext)
	mustOK(t, await(t, res), 504)
}

// failure_mode_allow: a timeout or gRPC error lets the request continue unprocessed.
func TestFailureModeAllow(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, request_body_mode: BUFFERED, response_header_mode: SKIP",
		"failure_mode_allow: true")}, clusters: []string{ca}})
	res := e.do("POST", "/", "payload", "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	st.Close(status.Error(codes.Internal, "boom"))
	mustOK(t, await(t, res), 200)
	if got := a.next(t); got.Body != "payload" {
		t.Fatalf("upstream got %q", got.Body)
	}
}

// A gRPC error without failure_mode_allow → local reply with status_on_error and
// details ext_proc_error_gRPC_error_<code>{<msg>}.
func TestGrpcErrorStatusOnError(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, response_header_mode: SKIP", "status_on_error: {code: 502}")}, clusters: []string{ca}})
	res := e.do("GET", "/", "", "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	st.Close(status.Error(codes.Internal, "boom"))
	mustOK(t, await(t, res), 502)
	if l := e.nextLog(); l.ResponseCodeDetails != "ext_proc_error_gRPC_error_13{boom}" {
		t.Fatalf("details %q", l.ResponseCodeDetails)
	}
	a.none(t)
}

// The server closing the stream with OK means "continue without me".
func TestServerCloseOKContinues(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, response_header_mode: SEND")}, clusters: []string{ca}})
	res := e.do("GET", "/", "", "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	st.Close(nil)
	mustOK(t, await(t, res), 200)
	a.next(t)
}

// A response that does not match the pending state is spurious: without
// failure_mode_allow it is a local reply with status_on_error (1.35+).
func TestSpuriousMessage(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, response_header_mode: SKIP")}, clusters: []string{ca}})
	res := e.do("GET", "/", "", "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	st.Send(t, reqBodyResp(nil))
	mustOK(t, await(t, res), 500)
	if l := e.nextLog(); l.ResponseCodeDetails != "spurious_message" {
		t.Fatalf("details %q", l.ResponseCodeDetails)
	}
	a.none(t)
}

// ImmediateResponse from a downstream filter: local reply with its status, headers
// (checked with mutation_rules), body and details; the stream is closed; status
// below 200 becomes 200; dynamic metadata is applied.
func TestImmediateResponseDownstream(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, response_header_mode: SKIP")}, clusters: []string{ca}})
	res := e.do("GET", "/", "", "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	st.Send(t, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
		Status:  &typev3.HttpStatus{Code: typev3.StatusCode_TooManyRequests},
		Headers: setHeaders("retry-after", "3", "content-type", "application/json", "x-envoy-denied", "1"),
		Body:    []byte(`{"error":"rate"}`),
		Details: "rate limited",
	}}})
	r := await(t, res)
	mustOK(t, r, 429)
	if r.body != `{"error":"rate"}` || r.resp.Header.Get("Retry-After") != "3" || r.resp.Header.Get("Content-Type") != "application/json" || r.resp.Header.Get("X-Envoy-Denied") != "" {
		t.Fatalf("reply %q %v", r.body, r.resp.Header)
	}
	if l := e.nextLog(); l.ResponseCodeDetails != "rate_limited" {
		t.Fatalf("details %q", l.ResponseCodeDetails)
	}
	if err := st.WaitEnd(t); grpcCode(err) != "Canceled" {
		t.Fatalf("stream end %v", err)
	}
	a.none(t)
}

// Dynamic metadata: a receiving namespace set by the downstream filter is forwarded
// (forwarding_namespaces) to the upstream filter of the same request (docs/design.md §6 item 11).
func TestDynamicMetadataSharedWithUpstreamFilter(t *testing.T) {
	ps := newProcServer(t)
	a := newUpstream(t, nil)
	up := extProcYAML("attempt", "request_header_mode: SEND, response_header_mode: SKIP", "metadata_options: {forwarding_namespaces: {untyped: [sy]}}")
	e := start(t, cfg{procAddr: ps.addr,
		filters:  []string{extProcYAML("route", "request_header_mode: SEND, response_header_mode: SKIP", "metadata_options: {receiving_namespaces: {untyped: [sy]}}")},
		clusters: []string{clusterYAML("a", upstreamFiltersYAML(up), []string{endpointYAML(a.addr(), "")})},
	})
	res := e.do("GET", "/", "", "X-Cluster", "a")
	rs := ps.next(t, "route")
	rs.Recv(t)
	resp := reqHeadersResp(nil)
	md, _ := structpb.NewStruct(map[string]any{"sy": map[string]any{"attempt": "a1"}, "other": map[string]any{"x": "y"}})
	resp.DynamicMetadata = md
	rs.Send(t, resp)
	us := ps.next(t, "attempt")
	m := us.Recv(t)
	got := m.GetMetadataContext().GetFilterMetadata()
	if got["sy"].GetFields()["attempt"].GetStringValue() != "a1" || got["other"] != nil {
		t.Fatalf("metadata_context %v", m.GetMetadataContext())
	}
	us.Send(t, reqHeadersResp(nil))
	mustOK(t, await(t, res), 200)
	a.next(t)
}
