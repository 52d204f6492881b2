package extproc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/switchyard-gw/switchyard/internal/contract"
)

// BenchmarkStreamConcurrency drives the attempt role the way Envoy drives it under load: c
// concurrent attempt streams (c = 1, 8, 64) over two loopback TCP connections (Envoy keeps
// one per worker thread), each a 200-chunk OpenAI chat stream answered chunk by chunk
// (lockstep, as with a provider slower than the processor), with the messages the published
// attempt filter gets (the state as a request attribute on the first one). The same streams go to the no-op processor in the same iteration. The
// server runs as production does: its gRPC options, metrics, an info-level JSON logger.
//
// Reported per streamed chunk after the commit: the mean round trip of each server and their
// ratio (the target: ≤ 1.2), the process CPU (client, both servers' transport and the
// processor: the difference is what switchyard adds) and the allocations, from
// runtime.MemStats over the whole process, the client's included in both.
func BenchmarkStreamConcurrency(b *testing.B) {
	for _, c := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) { benchStreamConcurrency(b, c) })
	}
}

// chatStreamChunks is an OpenAI chat stream as the driver plays it: a role delta, content
// deltas, the finish chunk, the usage chunk and [DONE], 200 in all.
func chatStreamChunks() [][]byte {
	const head = `data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f9f4fb6dbf",`
	chunks := [][]byte{[]byte(head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}` + "\n\n")}
	for i := 0; i < 196; i++ {
		chunks = append(chunks, []byte(head+`"choices":[{"index":0,"delta":{"content":" token`+fmt.Sprint(i)+`"},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n"))
	}
	return append(chunks,
		[]byte(head+`"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`+"\n\n"),
		[]byte(head+`"choices":[],"usage":{"prompt_tokens":1028,"completion_tokens":196,"total_tokens":1224,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`+"\n\n"),
		[]byte("data: [DONE]\n\n"))
}

// concurrencyFixture is one attempt stream's messages: the setup up to the commit, then the
// chunks sent one by one.
type concurrencyFixture struct {
	setup  []*extprocv3.ProcessingRequest
	chunks []*extprocv3.ProcessingRequest
}

func newConcurrencyFixture(b *testing.B, srv *Server) concurrencyFixture {
	b.Helper()
	body := []byte(`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"` +
		strings.Repeat("hello ", 600) + `"}]}`)
	sealed := sealedStreamAttempt(b, srv)
	// The published attempt filter gets the state as a request attribute on the stream's
	// first message and no metadata on any other (contract.AttributeState).
	attrs := map[string]*structpb.Struct{attributesFilterName: {Fields: map[string]*structpb.Value{
		contract.AttributeClusterName: structpb.NewStringValue(contract.ClusterName("a")),
		contract.AttributeState:       structpb.NewStringValue(sealed)}}}
	f := concurrencyFixture{setup: []*extprocv3.ProcessingRequest{
		{Attributes: attrs, Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: hdrs(
			":method", "POST", ":path", "/v1/chat/completions", ":authority", "api.openai.com", ":scheme", "https",
			"content-type", "application/json", "x-request-id", "req-1", "content-length", fmt.Sprint(len(body)),
			"user-agent", "OpenAI/Python 1.59.7", "x-stainless-lang", "python", "x-envoy-expected-rq-timeout-ms", "30000",
			"x-envoy-attempt-count", "1")}}},
		{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}},
		{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: hdrs(
			":status", "200", "content-type", "text/event-stream; charset=utf-8", "openai-organization", "org-bench",
			"openai-processing-ms", "120", "openai-version", "2020-10-01", "x-request-id", "req_0123456789abcdef",
			"x-ratelimit-limit-requests", "10000", "x-ratelimit-remaining-requests", "9999")}}},
	}}
	for i, c := range chatStreamChunks() {
		m := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocv3.HttpBody{Body: c, EndOfStream: i == 199}}}
		if i < 2 {
			f.setup = append(f.setup, m) // the role delta is held, the first content commits
		} else {
			f.chunks = append(f.chunks, m)
		}
	}
	return f
}

// tcpConns serves srv with the production gRPC options on a loopback TCP listener and
// returns n client connections to it.
func tcpConns(b *testing.B, srv extprocv3.ExternalProcessorServer, opts []grpc.ServerOption, n int) []extprocv3.ExternalProcessorClient {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer(opts...)
	extprocv3.RegisterExternalProcessorServer(gs, srv)
	go func() { _ = gs.Serve(ln) }()
	b.Cleanup(gs.Stop)
	var out []extprocv3.ExternalProcessorClient
	for range n {
		cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cc.Close() })
		out = append(out, extprocv3.NewExternalProcessorClient(cc))
	}
	return out
}

// streamRun is one server's share of an iteration.
type streamRun struct {
	rtt    time.Duration // summed over the timed chunks
	chunks int
	cpu    time.Duration
	allocs uint64
}

// driveStreams runs c attempt streams at once over conns and returns their cost.
func driveStreams(b *testing.B, conns []extprocv3.ExternalProcessorClient, f concurrencyFixture, c, setupAnswers int) streamRun {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	allocs, cpu := ms.Mallocs, processCPU()
	var (
		mu  sync.Mutex
		run streamRun
		wg  sync.WaitGroup
	)
	errs := make(chan error, c)
	for i := range c {
		wg.Go(func() {
			rtt, err := oneStream(conns[i%len(conns)], f, setupAnswers)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			run.rtt += rtt
			run.chunks += len(f.chunks)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	runtime.ReadMemStats(&ms)
	run.allocs, run.cpu = ms.Mallocs-allocs, processCPU()-cpu
	return run
}

// oneStream sends the setup, reads its answers, then sends each chunk and waits for its
// answer; it returns the chunks' summed round trips.
func oneStream(c extprocv3.ExternalProcessorClient, f concurrencyFixture, setupAnswers int) (time.Duration, error) {
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), contract.HeaderRole, contract.RoleAttempt))
	defer cancel() // Envoy resets the stream once it is done with it
	s, err := c.Process(ctx)
	if err != nil {
		return 0, err
	}
	for _, m := range f.setup {
		if err := s.Send(m); err != nil {
			return 0, err
		}
	}
	for i := range setupAnswers {
		if _, err := s.Recv(); err != nil {
			return 0, fmt.Errorf("setup answer %d: %w", i+1, err)
		}
	}
	var rtt time.Duration
	for i, m := range f.chunks {
		t := time.Now()
		if err := s.Send(m); err != nil {
			return 0, err
		}
		r, err := s.Recv()
		if err != nil {
			return 0, fmt.Errorf("chunk %d: %w", i+3, err)
		}
		rtt += time.Since(t)
		if len(r.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetBody()) == 0 {
			return 0, fmt.Errorf("chunk %d: answer %v carries no body", i+3, r)
		}
	}
	_ = s.CloseSend()
	return rtt, nil
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchStreamConcurrency(b *testing.B, c int) {
	srv, _ := benchGatewayWith(b, Options{Metrics: NewMetrics(prometheus.NewRegistry()),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	f := newConcurrencyFixture(b, srv)
	sy := tcpConns(b, srv, srv.GRPCServerOptions(), 2)
	noop := tcpConns(b, noopProcessor{}, srv.GRPCServerOptions(), 2)
	var s, n streamRun
	add := func(to *streamRun, r streamRun) {
		to.rtt, to.chunks, to.cpu, to.allocs = to.rtt+r.rtt, to.chunks+r.chunks, to.cpu+r.cpu, to.allocs+r.allocs
	}
	// switchyard answers the request headers and body, then at the commit the response
	// headers and the first streamed body; the no-op answers all five messages.
	driveStreams(b, sy, f, c, 4)
	driveStreams(b, noop, f, c, 5)
	b.ResetTimer()
	for b.Loop() {
		add(&s, driveStreams(b, sy, f, c, 4))
		add(&n, driveStreams(b, noop, f, c, 5))
	}
	per := func(d time.Duration, r streamRun) float64 { return float64(d.Nanoseconds()) / float64(r.chunks) }
	b.ReportMetric(per(s.rtt, s)/1e3, "sy-rtt-us/chunk")
	b.ReportMetric(per(n.rtt, n)/1e3, "noop-rtt-us/chunk")
	b.ReportMetric(per(s.rtt, s)/per(n.rtt, n), "rtt-ratio")
	b.ReportMetric(per(s.cpu, s)/1e3, "sy-cpu-us/chunk")
	b.ReportMetric(per(n.cpu, n)/1e3, "noop-cpu-us/chunk")
	b.ReportMetric(float64(s.allocs)/float64(s.chunks), "sy-allocs/chunk")
	b.ReportMetric(float64(n.allocs)/float64(n.chunks), "noop-allocs/chunk")
}
