package extproc

import (
	"context"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/internal/contract"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
)

// The role benchmarks drive switchyard's ExternalProcessor over a real gRPC stream (bufconn)
// the way Envoy does, next to a no-op ExternalProcessor driven identically in the same run
// (docs/performance.md reports the ratios).

// noopProcessor answers every message with an empty CONTINUE (FULL_DUPLEX response bodies
// echoed), the least any ext_proc server costs.
type noopProcessor struct {
	extprocv3.UnimplementedExternalProcessorServer
}

func (noopProcessor) Process(s extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		req, err := s.Recv()
		if err != nil {
			return nil
		}
		var resp *extprocv3.ProcessingResponse
		switch r := req.GetRequest().(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			resp = continueRequestHeaders()
		case *extprocv3.ProcessingRequest_RequestBody:
			resp = continueRequestBody()
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			resp = continueResponseHeaders(mutation{})
		case *extprocv3.ProcessingRequest_ResponseBody:
			resp = streamedBody(r.ResponseBody.GetBody(), r.ResponseBody.GetEndOfStream())
		default:
			continue
		}
		if err := s.Send(resp); err != nil {
			return nil
		}
	}
}

// benchConn serves srv on bufconn and returns a client.
func benchConn(b *testing.B, srv extprocv3.ExternalProcessorServer) extprocv3.ExternalProcessorClient {
	b.Helper()
	ln := bufconn.Listen(1 << 20)
	// Both servers get the production server options, so they are driven identically.
	gs := grpc.NewServer(GRPCServerOptions()...)
	extprocv3.RegisterExternalProcessorServer(gs, srv)
	go func() { _ = gs.Serve(ln) }()
	b.Cleanup(gs.Stop)
	cc, err := grpc.NewClient("passthrough:///bufconn", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cc.Close() })
	return extprocv3.NewExternalProcessorClient(cc)
}

// exchange opens one stream as role, sends msgs and reads want answers.
func exchange(b *testing.B, c extprocv3.ExternalProcessorClient, role string, msgs []*extprocv3.ProcessingRequest, want int) {
	ctx := metadata.AppendToOutgoingContext(context.Background(), contract.HeaderRole, role)
	s, err := c.Process(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range msgs {
		if err := s.Send(m); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < want; i++ {
		if _, err := s.Recv(); err != nil {
			b.Fatalf("answer %d: %v", i+1, err)
		}
	}
	_ = s.CloseSend()
}

func benchGateway(b *testing.B) (*Server, *routing.Router) {
	b.Helper()
	return benchGatewayWith(b, Options{})
}

// benchGatewayWith is benchGateway's server with o.
func benchGatewayWith(b *testing.B, o Options) (*Server, *routing.Router) {
	b.Helper()
	w := uint32(1)
	cfg := &configv1.Config{}
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		cfg.Deployments = append(cfg.Deployments, &configv1.Deployment{Id: id, PublicModel: "gpt-4o", Provider: "openai",
			BaseUrl: "https://api.openai.com", ProviderModel: "gpt-4o", Weight: &w})
	}
	snap, err := config.Compile(1, cfg, map[string]string{"a": "sk-a"})
	if err != nil {
		b.Fatal(err)
	}
	router := routing.New(config.NewLive(snap), memstore.New(), routing.Options{})
	sealer, err := attemptstate.NewSealer(attemptstate.Keys{Current: make([]byte, attemptstate.KeySize)}, attemptstate.SealerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return NewServer(router, sealer, o), router
}

func hdrs(kv ...string) *corev3.HeaderMap {
	hm := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return hm
}

// chatBody4K is a 4 KiB chat request.
func chatBody4K() []byte {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 88)
	return []byte(`{"model":"gpt-4o","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"` + text + `"}],"temperature":0.2}`)
}

func routeMessages(body []byte) []*extprocv3.ProcessingRequest {
	return []*extprocv3.ProcessingRequest{
		{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: hdrs(
			":method", "POST", ":path", "/v1/chat/completions", ":authority", "gw.example", ":scheme", "https",
			"content-type", "application/json", "authorization", "Bearer sk-client", "x-request-id", "req-1",
			"content-length", "4096")}}},
		{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}},
	}
}

// BenchmarkRouteRole: a 4 KiB chat request's headers and body through the route role (parse,
// decide over 8 deployments, seal, answer), next to the no-op server and to the routing
// decision alone; reports the route role's cost without the decision as a ratio of the no-op.
func BenchmarkRouteRole(b *testing.B) {
	srv, router := benchGateway(b)
	msgs := routeMessages(chatBody4K())
	sy := benchConn(b, srv)
	noop := benchConn(b, noopProcessor{})
	req := &routing.Request{ID: "req-1", Model: "gpt-4o", Start: time.Now()}
	var routeT, noopT, decideT time.Duration
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		t := time.Now()
		exchange(b, sy, contract.RoleRoute, msgs, 2)
		routeT += time.Since(t)
		t = time.Now()
		exchange(b, noop, contract.RoleRoute, msgs, 2)
		noopT += time.Since(t)
		t = time.Now()
		router.Decide(context.Background(), req, &routing.History{})
		decideT += time.Since(t)
		n++
	}
	b.ReportMetric(float64(routeT.Nanoseconds())/float64(n), "route-ns/req")
	b.ReportMetric(float64(noopT.Nanoseconds())/float64(n), "noop-ns/req")
	b.ReportMetric(float64(decideT.Nanoseconds())/float64(n), "decide-ns/req")
	b.ReportMetric(float64(routeT-decideT)/float64(noopT), "route-minus-decide/noop")
}

// BenchmarkAttemptRoleJSON: one attempt of a JSON chat request through the attempt role
// (open the state, start the attempt, rewrite, hold and classify the response, finish the
// attempt), next to the no-op server driven with the same messages.
func BenchmarkAttemptRoleJSON(b *testing.B) {
	srv, _ := benchGateway(b)
	st := attemptstate.New(&routing.Request{ID: "req-1", Model: "gpt-4o", Start: time.Now()}, dialect.Chat, time.Now().Add(time.Hour))
	st.SaveHeader(":scheme", []byte("https"), true)
	st.SaveHeader(":authority", []byte("gw.example"), true)
	st.SaveHeader(":path", []byte("/v1/chat/completions"), true)
	snap := srv.router.Config()
	d := routing.Decision{Deployment: snap.Deployments["a"], Model: "gpt-4o"}
	st.Begin(&d, "req-1/1/x", time.Now())
	sealed, err := srv.sealer.Seal(st)
	if err != nil {
		b.Fatal(err)
	}
	md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{contract.MetadataNamespace: {Fields: map[string]*structpb.Value{
		metaState: structpb.NewStringValue(sealed)}}}}
	attrs := map[string]*structpb.Struct{attributesFilterName: {Fields: map[string]*structpb.Value{
		contract.AttributeClusterName: structpb.NewStringValue(contract.ClusterName("a"))}}}
	respBody := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the provider, a reasonably sized answer."},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":12,"total_tokens":1012}}`)
	msgs := []*extprocv3.ProcessingRequest{
		{MetadataContext: md, Attributes: attrs, Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: hdrs(
			":method", "POST", ":path", "/v1/chat/completions", ":authority", "gw.example", ":scheme", "https",
			"content-type", "application/json", "x-request-id", "req-1", "content-length", "4096")}}},
		{MetadataContext: md, Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: chatBody4K(), EndOfStream: true}}},
		{MetadataContext: md, Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: hdrs(
			":status", "200", "content-type", "application/json")}}},
		{MetadataContext: md, Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: respBody, EndOfStream: true}}},
	}
	sy := benchConn(b, srv)
	noop := benchConn(b, noopProcessor{})
	var syT, noopT time.Duration
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		t := time.Now()
		exchange(b, sy, contract.RoleAttempt, msgs, 4)
		syT += time.Since(t)
		t = time.Now()
		exchange(b, noop, contract.RoleAttempt, msgs, 4)
		noopT += time.Since(t)
		n++
	}
	b.ReportMetric(float64(syT.Nanoseconds())/float64(n), "attempt-ns/req")
	b.ReportMetric(float64(noopT.Nanoseconds())/float64(n), "noop-ns/req")
	b.ReportMetric(float64(syT)/float64(noopT), "attempt/noop")
}

// BenchmarkAttemptRoleStream: the per-chunk cost of the attempt role on a 200-chunk OpenAI
// chat stream after the commit (each chunk one SSE event: parse, classify, pass on), next
// to the no-op server driven the same way in the same run. Each iteration sets the stream
// up to its commit untimed, then sends the other chunks one by one, each answered before
// the next, as Envoy's FULL_DUPLEX_STREAMED does with a slow provider. allocs-per-chunk is
// what the attempt role allocates per chunk beyond the no-op (gRPC and protobuf included in
// both).
func BenchmarkAttemptRoleStream(b *testing.B) {
	const chunks = 200
	srv, _ := benchGateway(b)
	sealed := sealedStreamAttempt(b, srv)
	md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{contract.MetadataNamespace: {Fields: map[string]*structpb.Value{
		metaState: structpb.NewStringValue(sealed)}}}}
	attrs := map[string]*structpb.Struct{attributesFilterName: {Fields: map[string]*structpb.Value{
		contract.AttributeClusterName: structpb.NewStringValue(contract.ClusterName("a"))}}}
	setup := []*extprocv3.ProcessingRequest{
		{MetadataContext: md, Attributes: attrs, Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: hdrs(
			":method", "POST", ":path", "/v1/chat/completions", ":authority", "gw.example", ":scheme", "https",
			"content-type", "application/json", "x-request-id", "req-1", "content-length", "120")}}},
		{MetadataContext: md, Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{
			Body: []byte(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`), EndOfStream: true}}},
		{MetadataContext: md, Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: hdrs(
			":status", "200", "content-type", "text/event-stream")}}},
	}
	body := func(s string, end bool) *extprocv3.ProcessingRequest {
		return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte(s), EndOfStream: end}}}
	}
	event := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"token "},"finish_reason":null}]}` + "\n\n"
	var stream []*extprocv3.ProcessingRequest
	for i := 0; i < chunks-2; i++ {
		stream = append(stream, body(event, false))
	}
	stream = append(stream,
		body(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n", false),
		body("data: [DONE]\n\n", true))
	// run sends the setup and the first chunk (the commit) untimed, then the other chunks
	// one by one; it returns their time and allocations.
	run := func(c extprocv3.ExternalProcessorClient, setupAnswers int) (time.Duration, uint64) {
		ctx := metadata.AppendToOutgoingContext(context.Background(), contract.HeaderRole, contract.RoleAttempt)
		s, err := c.Process(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range append(setup, stream[0]) {
			if err := s.Send(m); err != nil {
				b.Fatal(err)
			}
		}
		for i := 0; i < setupAnswers; i++ {
			if _, err := s.Recv(); err != nil {
				b.Fatalf("setup answer %d: %v", i+1, err)
			}
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		mallocs := ms.Mallocs
		t := time.Now()
		for i, m := range stream[1:] {
			if err := s.Send(m); err != nil {
				b.Fatal(err)
			}
			r, err := s.Recv()
			if err != nil {
				b.Fatalf("chunk %d: %v", i+2, err)
			}
			if len(r.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetBody()) == 0 && i < chunks-3 {
				b.Fatalf("chunk %d: answer %v carries no body", i+2, r)
			}
		}
		took := time.Since(t)
		runtime.ReadMemStats(&ms)
		_ = s.CloseSend()
		return took, ms.Mallocs - mallocs
	}
	sy := benchConn(b, srv)
	noop := benchConn(b, noopProcessor{})
	var syT, noopT time.Duration
	var syA, noopA uint64
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		// request headers, request body, then at the commit the response headers and the
		// first chunk; the no-op answers the response headers and the chunk.
		t, a := run(sy, 4)
		syT, syA = syT+t, syA+a
		t, a = run(noop, 4)
		noopT, noopA = noopT+t, noopA+a
		n++
	}
	per := float64(n * (chunks - 1))
	b.ReportMetric(float64(syT.Nanoseconds())/per, "attempt-ns/chunk")
	b.ReportMetric(float64(noopT.Nanoseconds())/per, "noop-ns/chunk")
	b.ReportMetric(float64(syT)/float64(noopT), "attempt/noop")
	b.ReportMetric(float64(syA)/per, "attempt-allocs/chunk")
	b.ReportMetric(float64(noopA)/per, "noop-allocs/chunk")
}

// sealedStreamAttempt is the sealed state of a streamed chat request's first attempt, on
// deployment "a", as the route role hands it to the attempt role.
func sealedStreamAttempt(b *testing.B, srv *Server) string {
	b.Helper()
	st := attemptstate.New(&routing.Request{ID: "req-1", Model: "gpt-4o", Stream: true, Start: time.Now()}, dialect.Chat, time.Now().Add(time.Hour))
	st.SaveHeader(":scheme", []byte("https"), true)
	st.SaveHeader(":authority", []byte("gw.example"), true)
	st.SaveHeader(":path", []byte("/v1/chat/completions"), true)
	d := routing.Decision{Deployment: srv.router.Config().Deployments["a"], Model: "gpt-4o"}
	st.Begin(&d, "req-1/1/x", time.Now())
	sealed, err := srv.sealer.Seal(st)
	if err != nil {
		b.Fatal(err)
	}
	return sealed
}

// continueRequestBody lets a buffered request body go on unchanged (the no-op's answer; the
// route role always answers a body with a decision).
func continueRequestBody() *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
		RequestBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{}},
	}}
}
