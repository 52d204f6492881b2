package extproc

import (
	"context"
	"net"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/switchyard-gw/switchyard/internal/contract"
)

// serve runs r's Server on bufconn behind a real gRPC server and returns a client conn.
func (r *rig) serve(t *testing.T) *grpc.ClientConn {
	t.Helper()
	ln := bufconn.Listen(1 << 20)
	gs := grpc.NewServer(GRPCServerOptions()...)
	r.srv.Register(gs)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient("passthrough:///bufconn", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func TestServerRefusesAStreamWithoutARole(t *testing.T) {
	cc := newRig(t).serve(t)
	for _, role := range []string{"", "router"} {
		ctx := context.Background()
		if role != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, contract.HeaderRole, role)
		}
		s, err := extprocv3.NewExternalProcessorClient(cc).Process(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Send(reqHeaders(true, ":method", "GET", ":path", "/v1/models"))
		if _, err := s.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Errorf("role %q: err %v, want InvalidArgument", role, err)
		}
	}
}

func TestServerRouteStreamOverGRPC(t *testing.T) {
	cc := newRig(t).serve(t)
	ctx := metadata.AppendToOutgoingContext(context.Background(), contract.HeaderRole, contract.RoleRoute)
	s, err := extprocv3.NewExternalProcessorClient(cc).Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(reqHeaders(true, ":method", "GET", ":path", "/v1/models", "x-request-id", "r")); err != nil {
		t.Fatal(err)
	}
	a, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if a.GetImmediateResponse().GetStatus().GetCode() != 200 {
		t.Errorf("answer %v", a)
	}
	// The route role closes its stream with OK after its last answer.
	if _, err := s.Recv(); err == nil || status.Code(err) != codes.OK && err.Error() != "EOF" {
		t.Errorf("after the last answer: %v, want the stream closed with OK", err)
	}
}

func TestServerHealth(t *testing.T) {
	cc := newRig(t).serve(t)
	for _, svc := range []string{"", extprocv3.ExternalProcessor_ServiceDesc.ServiceName} {
		res, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q: %v %v", svc, res, err)
		}
	}
}
