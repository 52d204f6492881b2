package sim_test

import (
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// extProcLimitYAML is an ext_proc filter whose envoy_grpc sets max_receive_message_length.
func extProcLimitYAML(limit string, extra ...string) string {
	f := extProcYAML("route", "request_header_mode: SEND, response_header_mode: SKIP", extra...)
	return strings.Replace(f, "{cluster_name: extproc}", "{cluster_name: extproc"+limit+"}", 1)
}

func bigMetadataResp(n int) *extprocv3.ProcessingResponse {
	md, _ := structpb.NewStruct(map[string]any{"ns": map[string]any{"k": strings.Repeat("x", n)}})
	r := reqHeadersResp(nil)
	r.DynamicMetadata = md
	return r
}

// A reply above grpc_service.envoy_grpc.max_receive_message_length ends the stream
// with RESOURCE_EXHAUSTED (empty message): the filter's gRPC error path answers
// status_on_error, or continues with failure_mode_allow.
func TestExtProcMaxReceiveMessageLength(t *testing.T) {
	ps := newProcServer(t)
	u := newUpstream(t, nil)
	clusters := []string{clusterYAML("a", "", []string{endpointYAML(u.addr(), "")})}
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcLimitYAML(", max_receive_message_length: 512")}, clusters: clusters})

	ch := e.do("GET", "/", "", "X-Cluster", "a")
	s := ps.next(t, "route")
	s.Recv(t)
	s.Send(t, bigMetadataResp(1024))
	mustOK(t, await(t, ch), 500)
	if l := e.nextLog(); l.ResponseCodeDetails != "ext_proc_error_gRPC_error_8{}" {
		t.Fatalf("access log %+v", l)
	}
	u.none(t)

	// Below the limit the reply is processed.
	ch = e.do("GET", "/", "", "X-Cluster", "a")
	s = ps.next(t, "route")
	s.Recv(t)
	s.Send(t, bigMetadataResp(16))
	mustOK(t, await(t, ch), 200)
	e.nextLog()

	e2 := start(t, cfg{procAddr: ps.addr, filters: []string{extProcLimitYAML(", max_receive_message_length: 512", "failure_mode_allow: true")}, clusters: clusters})
	ch = e2.do("GET", "/", "", "X-Cluster", "a")
	s = ps.next(t, "route")
	s.Recv(t)
	s.Send(t, bigMetadataResp(1024))
	mustOK(t, await(t, ch), 200)
}

// Without the field there is no limit (Envoy's default 0), not grpc-go's 4 MiB.
func TestExtProcReceiveUnlimitedByDefault(t *testing.T) {
	ps := newProcServer(t)
	u := newUpstream(t, nil)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcLimitYAML("", "message_timeout: 5s")}, // 5 MiB takes a while under -race
		clusters: []string{clusterYAML("a", "", []string{endpointYAML(u.addr(), "")})}})
	ch := e.do("GET", "/", "", "X-Cluster", "a")
	s := ps.next(t, "route")
	s.Recv(t)
	s.Send(t, bigMetadataResp(5<<20))
	mustOK(t, await(t, ch), 200)
}
