package sim_test

import (
	"context"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Local replies to a gRPC request are trailers-only gRPC responses: grpc-status from
// ImmediateResponse.grpc_status or mapped from the HTTP code
// (Grpc::Utility::httpToGrpcStatus), grpc-message the percent-encoded body
// (Utility::prepareLocalReply in source/common/http/utility.cc).
func TestLocalReplyToGrpcClient(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("dn", "request_header_mode: SEND, response_header_mode: SKIP")}, clusters: []string{ca}})
	conn, err := grpc.NewClient("passthrough:///"+e.s.Addr("ingress"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := healthpb.NewHealthClient(conn)
	call := func(cluster string) <-chan error {
		ch := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-cluster", cluster), wait)
			defer cancel()
			_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
			ch <- err
		}()
		return ch
	}
	check := func(ch <-chan error, code codes.Code, msg string) {
		t.Helper()
		err := <-ch
		if s := status.Convert(err); s.Code() != code || s.Message() != msg {
			t.Fatalf("gRPC status %v %q, want %v %q", s.Code(), s.Message(), code, msg)
		}
	}

	res := call("a")
	st := ps.next(t, "dn")
	if h := hdrs(st.Recv(t)); h["content-type"] != "application/grpc" {
		t.Fatalf("request headers %v", h)
	}
	st.Send(t, immediate(typev3.StatusCode_Forbidden, "denied"))
	check(res, codes.PermissionDenied, "denied")

	res = call("a")
	st = ps.next(t, "dn")
	st.Recv(t)
	ir := immediate(typev3.StatusCode_TooManyRequests, "slow down: 100%\n")
	ir.GetImmediateResponse().GrpcStatus = &extprocv3.GrpcStatus{Status: uint32(codes.ResourceExhausted)}
	st.Send(t, ir)
	check(res, codes.ResourceExhausted, "slow down: 100%\n")

	// The router's own local replies too: an unknown cluster is 503 NC → UNAVAILABLE.
	res = call("nope")
	st = ps.next(t, "dn")
	st.Recv(t)
	st.Send(t, reqHeadersResp(nil))
	check(res, codes.Unavailable, "")
	a.none(t)
}
