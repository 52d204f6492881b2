package replica_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/internal/replica"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
)

func router(t *testing.T) (*routing.Router, *config.Live) {
	t.Helper()
	cfg := &configv1.Config{Deployments: []*configv1.Deployment{
		{Id: "a", PublicModel: "gpt-4o", Provider: "openai", BaseUrl: "http://127.0.0.1:1", ProviderModel: "gpt-4o"},
	}}
	snap, err := config.Compile(1, cfg, map[string]string{"a": "sk-a"})
	if err != nil {
		t.Fatal(err)
	}
	live := config.NewLive(snap)
	return routing.New(live, memstore.New(), routing.Options{}), live
}

func keys() attemptstate.Keys {
	return attemptstate.Keys{Current: bytes.Repeat([]byte{7}, attemptstate.KeySize)}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// A configuration whose maxAttempts the route's redirect budget cannot carry is refused, as
// the binary refuses it, and the listeners handed over are closed.
func TestNewRefusesAttemptsBeyondTheRedirectBudget(t *testing.T) {
	r, live := router(t)
	ext, tramp := listen(t), listen(t)
	_, err := replica.New(replica.Config{Router: r, Live: live, Keys: keys(), MaxRedirects: 1,
		Listeners: replica.Listeners{ExtProc: ext, Trampoline: tramp}})
	if err == nil || !strings.Contains(err.Error(), "maxAttempts") {
		t.Fatalf("err %v, want the redirect budget refused", err)
	}
	for _, ln := range []net.Listener{ext, tramp} {
		if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("listener %s: Accept %v, want it closed", ln.Addr(), err)
		}
	}
}

func start(t *testing.T, c replica.Config) *replica.Replica {
	t.Helper()
	rt, live := router(t)
	c.Router, c.Live, c.Keys = rt, live, keys()
	r, err := replica.New(c)
	if err != nil {
		t.Fatal(err)
	}
	r.Serve(context.Background(), make(chan error, 3))
	return r
}

func stream(t *testing.T, addr string) extprocv3.ExternalProcessor_ProcessClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	ctx := metadata.AppendToOutgoingContext(context.Background(), contract.HeaderRole, contract.RoleRoute)
	s, err := extprocv3.NewExternalProcessorClient(cc).Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The message limits come from the one body-size setting (plus 1 MiB of framing): a
// message over them is refused by gRPC before any role sees it (gRPC's default limit, 4
// MiB, would let these 2 MiB through).
func TestMessageLimitFollowsMaxRequestBody(t *testing.T) {
	r := start(t, replica.Config{MaxRequestBody: 64 << 10})
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	s := stream(t, r.ExtProcAddr())
	body := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: bytes.Repeat([]byte("x"), 2<<20), EndOfStream: true}}}
	_ = s.Send(body)
	_, err := s.Recv()
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("Recv: %v, want ResourceExhausted", err)
	}
}

// Shutdown lets an open stream run until its context ends, then cuts it; with a context
// already done it is a crash.
func TestShutdownDrainsUntilItsContextEnds(t *testing.T) {
	r := start(t, replica.Config{})
	s := stream(t, r.ExtProcAddr())
	// The route role answers the request headers and waits for the buffered body: the
	// stream is open on the server.
	hdrs := &corev3.HeaderMap{}
	for k, v := range map[string]string{":method": "POST", ":path": "/v1/chat/completions", "content-type": "application/json"} {
		hdrs.Headers = append(hdrs.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(v)})
	}
	if err := s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: hdrs}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	r.Shutdown(ctx)
	if ctx.Err() == nil {
		t.Fatal("Shutdown returned while a stream was still open and its context running")
	}
	if _, err := s.Recv(); err == nil {
		t.Fatal("the stream outlived Shutdown")
	}
	if _, err := net.Dial("tcp", r.TrampolineAddr()); err == nil {
		t.Error("the trampoline still accepts connections after Shutdown")
	}
}
