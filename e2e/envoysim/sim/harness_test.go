package sim_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim"
)

// wait bounds every blocking step of a test; it is a safety net, never a sleep.
const wait = 10 * time.Second

// ---------------------------------------------------------------- ext_proc server

// procServer is a scripted ext_proc gRPC server. Every Process stream is handed to
// the test through a per-role channel (role = the x-role initial metadata).
type procServer struct {
	extprocv3.UnimplementedExternalProcessorServer
	addr string
	mu   sync.Mutex
	byRl map[string]chan *procStream
}

func newProcServer(t *testing.T) *procServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ps := &procServer{addr: ln.Addr().String(), byRl: map[string]chan *procStream{}}
	gs := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(gs, ps)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	return ps
}

func (p *procServer) ch(role string) chan *procStream {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.byRl[role]
	if !ok {
		c = make(chan *procStream, 64)
		p.byRl[role] = c
	}
	return c
}

func (p *procServer) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	md, _ := metadata.FromIncomingContext(srv.Context())
	role := ""
	if v := md.Get("x-role"); len(v) > 0 {
		role = v[0]
	}
	s := &procStream{md: md, srv: srv, recv: make(chan *extprocv3.ProcessingRequest, 64), ended: make(chan error, 1), finish: make(chan error, 1)}
	go func() {
		for {
			req, err := srv.Recv()
			if err != nil {
				s.ended <- err
				return
			}
			s.recv <- req
		}
	}()
	p.ch(role) <- s
	select {
	case err := <-s.finish:
		return err
	case <-srv.Context().Done():
		return srv.Context().Err()
	}
}

// next returns the next stream opened for role.
func (p *procServer) next(t *testing.T, role string) *procStream {
	t.Helper()
	select {
	case s := <-p.ch(role):
		return s
	case <-time.After(wait):
		t.Fatalf("no ext_proc stream opened for role %q", role)
		return nil
	}
}

// none asserts that no stream is waiting for role.
func (p *procServer) none(t *testing.T, role string) {
	t.Helper()
	select {
	case <-p.ch(role):
		t.Fatalf("unexpected ext_proc stream for role %q", role)
	default:
	}
}

type procStream struct {
	md     metadata.MD
	srv    extprocv3.ExternalProcessor_ProcessServer
	recv   chan *extprocv3.ProcessingRequest
	ended  chan error
	finish chan error
}

func (s *procStream) Recv(t *testing.T) *extprocv3.ProcessingRequest {
	t.Helper()
	select {
	case r := <-s.recv:
		return r
	case err := <-s.ended:
		// The pump queues messages before the end: prefer a queued message.
		select {
		case r := <-s.recv:
			s.ended <- err
			return r
		default:
		}
		t.Fatalf("ext_proc stream ended (%v) while a message was expected", err)
	case <-time.After(wait):
		t.Fatal("no ext_proc message received")
	}
	return nil
}

func (s *procStream) Send(t *testing.T, r *extprocv3.ProcessingResponse) {
	t.Helper()
	if err := s.srv.Send(r); err != nil {
		t.Fatalf("ext_proc send: %v", err)
	}
}

// Close ends the stream from the server side with err (nil = OK).
func (s *procStream) Close(err error) { s.finish <- err }

// DrainUntilEnd discards messages until envoysim ends the stream.
func (s *procStream) DrainUntilEnd(t *testing.T) error {
	t.Helper()
	for {
		select {
		case err := <-s.ended:
			return err
		case <-s.recv:
		case <-time.After(wait):
			t.Fatal("ext_proc stream was not closed by envoysim")
			return nil
		}
	}
}

// WaitEnd waits until envoysim ends the stream and returns the Recv error.
func (s *procStream) WaitEnd(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.ended:
		return err
	case r := <-s.recv:
		t.Fatalf("unexpected ext_proc message while waiting for stream end: %v", r)
	case <-time.After(wait):
		t.Fatal("ext_proc stream was not closed by envoysim")
	}
	return nil
}

// ------------------------------------------------------------------ messages

func hdrs(r *extprocv3.ProcessingRequest) map[string]string {
	var hm *corev3.HeaderMap
	switch x := r.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		hm = x.RequestHeaders.GetHeaders()
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		hm = x.ResponseHeaders.GetHeaders()
	case *extprocv3.ProcessingRequest_RequestTrailers:
		hm = x.RequestTrailers.GetTrailers()
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		hm = x.ResponseTrailers.GetTrailers()
	}
	out := map[string]string{}
	for _, h := range hm.GetHeaders() {
		out[h.GetKey()] = string(h.GetRawValue())
	}
	return out
}

func setHeaders(kv ...string) *extprocv3.HeaderMutation {
	m := &extprocv3.HeaderMutation{}
	for i := 0; i+1 < len(kv); i += 2 {
		m.SetHeaders = append(m.SetHeaders, &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])}})
	}
	return m
}

func common(mut *extprocv3.HeaderMutation) *extprocv3.CommonResponse {
	return &extprocv3.CommonResponse{HeaderMutation: mut}
}

func reqHeadersResp(c *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{Response: c}}}
}

func respHeadersResp(c *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{Response: c}}}
}

func reqBodyResp(c *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{Response: c}}}
}

func respBodyResp(c *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{Response: c}}}
}

func streamedBody(b string, end bool) *extprocv3.CommonResponse {
	return &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
		StreamedResponse: &extprocv3.StreamedBodyResponse{Body: []byte(b), EndOfStream: end}}}}
}

func replaceBody(b string) *extprocv3.BodyMutation {
	return &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte(b)}}
}

func grpcCode(err error) string { return status.Code(err).String() }

// ------------------------------------------------------------------ upstreams

// upstream is a scripted HTTP server recording what it received.
type upstream struct {
	*httptest.Server
	reqs chan *recorded
}

type recorded struct {
	Method string
	Path   string
	Host   string
	Header http.Header
	Body   string
}

func newUpstream(t *testing.T, h func(w http.ResponseWriter, r *http.Request, rec *recorded)) *upstream {
	t.Helper()
	u := &upstream{reqs: make(chan *recorded, 64)}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec := &recorded{Method: r.Method, Path: r.RequestURI, Host: r.Host, Header: r.Header.Clone(), Body: string(b)}
		u.reqs <- rec
		if h != nil {
			h(w, r, rec)
			return
		}
		w.Header().Set("content-type", "text/plain")
		_, _ = io.WriteString(w, "ok from "+r.Host)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) addr() string { return u.Listener.Addr().String() }

func (u *upstream) next(t *testing.T) *recorded {
	t.Helper()
	select {
	case r := <-u.reqs:
		return r
	case <-time.After(wait):
		t.Fatal("upstream received no request")
		return nil
	}
}

func (u *upstream) none(t *testing.T) {
	t.Helper()
	select {
	case r := <-u.reqs:
		t.Fatalf("upstream unexpectedly received %s %s", r.Method, r.Path)
	default:
	}
}

// ------------------------------------------------------------------ config

// extProcYAML renders an ext_proc http filter list item in YAML flow style.
func extProcYAML(role, mode string, extra ...string) string {
	fields := []string{
		`"@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor`,
		`grpc_service: {envoy_grpc: {cluster_name: extproc}, initial_metadata: [{key: x-role, value: ` + role + `}]}`,
		`processing_mode: {` + mode + `}`,
	}
	fields = append(fields, extra...)
	return `{name: envoy.filters.http.ext_proc, typed_config: {` + strings.Join(fields, ", ") + `}}`
}

// endpointYAML renders an lb endpoint: "addr" or "addr|{metadata...}".
func endpointYAML(addr string, extra string) string {
	host, port, _ := net.SplitHostPort(addr)
	e := fmt.Sprintf(`endpoint: {address: {socket_address: {address: %s, port_value: %s}}}`, host, port)
	if extra != "" {
		e += ", " + extra
	}
	return "{" + e + "}"
}

// clusterYAML renders a STATIC cluster: priorities[i] lists the endpoints of priority i.
func clusterYAML(name string, extra string, priorities ...[]string) string {
	var eps []string
	for p, list := range priorities {
		eps = append(eps, fmt.Sprintf(`{priority: %d, lb_endpoints: [%s]}`, p, strings.Join(list, ", ")))
	}
	c := fmt.Sprintf(`{name: %s, type: STATIC, connect_timeout: 2s, load_assignment: {cluster_name: %s, endpoints: [%s]}`, name, name, strings.Join(eps, ", "))
	if extra != "" {
		c += ", " + extra
	}
	return c + "}"
}

// upstreamFiltersYAML is typed_extension_protocol_options with upstream http_filters.
func upstreamFiltersYAML(filters ...string) string {
	list := append(append([]string{}, filters...),
		`{name: envoy.filters.http.upstream_codec, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec}}`)
	return `typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: {"@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, explicit_http_config: {http_protocol_options: {}}, http_filters: [` +
		strings.Join(list, ", ") + `]}}`
}

type cfg struct {
	procAddr    string
	filters     []string // downstream ext_proc filters (YAML flow items)
	route       string   // extra RouteAction fields, flow style (e.g. "timeout: 0s, retry_policy: {...}")
	routeFields string   // extra Route fields
	vhost       string   // extra VirtualHost fields
	clusters    []string
	bufferLimit int
	extraTop    string
	hcm         []string // extra HttpConnectionManager fields, one YAML line each
	procCluster string   // extra fields of the extproc cluster
}

func (c cfg) yaml() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nstatic_resources:\n  listeners:\n  - name: ingress\n    address: {socket_address: {address: 127.0.0.1, port_value: 0}}\n", c.extraTop)
	if c.bufferLimit > 0 {
		fmt.Fprintf(&b, "    per_connection_buffer_limit_bytes: %d\n", c.bufferLimit)
	}
	route := "cluster_header: x-cluster"
	if c.route != "" {
		route += ", " + c.route
	}
	routeFields := ""
	if c.routeFields != "" {
		routeFields = ", " + c.routeFields
	}
	vhost := ""
	if c.vhost != "" {
		vhost = ", " + c.vhost
	}
	fmt.Fprintf(&b, `    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config: {name: rc, virtual_hosts: [{name: vh, domains: ["*"], include_request_attempt_count: true%s, routes: [{name: r0, match: {prefix: "/"}%s, route: {%s}}]}]}
`, vhost, routeFields, route)
	for _, f := range c.hcm {
		fmt.Fprintf(&b, "          %s\n", f)
	}
	b.WriteString("          http_filters:\n")
	for _, f := range c.filters {
		fmt.Fprintf(&b, "          - %s\n", f)
	}
	fmt.Fprintf(&b, "          - {name: envoy.filters.http.router, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}\n")
	b.WriteString("  clusters:\n")
	procAddr := c.procAddr
	if procAddr == "" {
		procAddr = "127.0.0.1:1"
	}
	procExtra := `typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: {"@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, explicit_http_config: {http2_protocol_options: {}}}}`
	if c.procCluster != "" {
		procExtra += ", " + c.procCluster
	}
	fmt.Fprintf(&b, "  - %s\n", clusterYAML("extproc", procExtra, []string{endpointYAML(procAddr, "")}))
	for _, cl := range c.clusters {
		fmt.Fprintf(&b, "  - %s\n", cl)
	}
	return b.String()
}

// env is a running envoysim plus helpers.
type env struct {
	t    *testing.T
	s    *sim.Sim
	url  string
	logs chan sim.AccessLogEntry
}

func logger(t *testing.T) *slog.Logger {
	if os.Getenv("ENVOYSIM_DEBUG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func start(t *testing.T, c cfg, opts ...sim.Option) *env {
	t.Helper()
	y := c.yaml()
	bs, err := sim.Load([]byte(y))
	if err != nil {
		t.Fatalf("load: %v\n%s", err, y)
	}
	return startBootstrap(t, bs, opts...)
}

func startYAML(t *testing.T, y string, opts ...sim.Option) *env {
	t.Helper()
	bs, err := sim.Load([]byte(y))
	if err != nil {
		t.Fatalf("load: %v\n%s", err, y)
	}
	return startBootstrap(t, bs, opts...)
}

func startBootstrap(t *testing.T, bs *bootstrapv3.Bootstrap, opts ...sim.Option) *env {
	t.Helper()
	e := &env{t: t, logs: make(chan sim.AccessLogEntry, 64)}
	opts = append([]sim.Option{sim.WithLogger(logger(t)), sim.WithAccessLog(func(a sim.AccessLogEntry) { e.logs <- a })}, opts...)
	s, err := sim.New(bs, opts...)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := s.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(s.Close)
	e.s = s
	e.url = "http://" + s.Addr("ingress")
	return e
}

// lastLog returns the access log entry of the next finished stream.
func (e *env) nextLog() sim.AccessLogEntry {
	e.t.Helper()
	select {
	case l := <-e.logs:
		return l
	case <-time.After(wait):
		e.t.Fatal("no access log entry")
		return sim.AccessLogEntry{}
	}
}

type result struct {
	resp *http.Response
	body string
	err  error
}

// do sends a request in the background; the test scripts the servers meanwhile.
func (e *env) do(method, path, body string, header ...string) <-chan result {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	return e.doReader(method, path, rd, header...)
}

// doReader is do with a streaming body.
func (e *env) doReader(method, path string, rd io.Reader, header ...string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(method, e.url+path, rd)
		for i := 0; i+1 < len(header); i += 2 {
			if strings.EqualFold(header[i], "host") {
				req.Host = header[i+1]
				continue
			}
			req.Header.Add(header[i], header[i+1])
		}
		client := &http.Client{Timeout: wait, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			ch <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		ch <- result{resp: resp, body: string(b), err: err}
	}()
	return ch
}

func await(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(wait + time.Second):
		t.Fatal("client got no response")
		return result{}
	}
}

func mustOK(t *testing.T, r result, code int) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("request failed: %v", r.err)
	}
	if r.resp.StatusCode != code {
		t.Fatalf("status %d, want %d; body %q", r.resp.StatusCode, code, r.body)
	}
}
