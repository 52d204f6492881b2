package extproc

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/tidwall/gjson"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/internal/fakeclock"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
)

// Per-message tests of both roles, without gRPC: a fake stream feeds the processor Envoy's
// messages one by one and collects its answers.

type fakeStream struct {
	grpc.ServerStream
	ctx  context.Context
	in   chan *extprocv3.ProcessingRequest
	sent chan *extprocv3.ProcessingResponse
}

func newFakeStream(ctx context.Context) *fakeStream {
	return &fakeStream{ctx: ctx, in: make(chan *extprocv3.ProcessingRequest, 8), sent: make(chan *extprocv3.ProcessingResponse, 8)}
}

func (f *fakeStream) Context() context.Context { return f.ctx }

// Send keeps a copy, as gRPC's SendMsg marshals the answer before it returns (the attempt
// role refills one streamed answer per chunk).
func (f *fakeStream) Send(r *extprocv3.ProcessingResponse) error {
	f.sent <- proto.CloneOf(r)
	return nil
}

func (f *fakeStream) Recv() (*extprocv3.ProcessingRequest, error) {
	select {
	case r, ok := <-f.in:
		if !ok {
			return nil, io.EOF
		}
		return r, nil
	case <-f.ctx.Done():
		return nil, f.ctx.Err()
	}
}

// answer feeds m and returns the next answer.
func (f *fakeStream) answer(t *testing.T, m *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	t.Helper()
	f.in <- m
	return f.next(t)
}

func (f *fakeStream) next(t *testing.T) *extprocv3.ProcessingResponse {
	t.Helper()
	select {
	case r := <-f.sent:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
		return nil
	}
}

func (f *fakeStream) none(t *testing.T) {
	t.Helper()
	select {
	case r := <-f.sent:
		t.Fatalf("unexpected answer %v", r)
	default:
	}
}

type rig struct {
	srv   *Server
	clock *fakeclock.Clock
	store *memstore.Store
}

func newRig(t *testing.T, deps ...*configv1.Deployment) *rig {
	t.Helper()
	if len(deps) == 0 {
		deps = []*configv1.Deployment{
			{Id: "a", PublicModel: "gpt-4o", Provider: "openai", BaseUrl: "https://api.openai.com", ProviderModel: "gpt-4o-2024"},
		}
	}
	secrets := map[string]string{}
	for _, d := range deps {
		secrets[d.Id] = "sk-provider-" + d.Id
	}
	snap, err := config.Compile(1, &configv1.Config{Deployments: deps}, secrets)
	if err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New(t0)
	st := memstore.New()
	router := routing.New(config.NewLive(snap), st, routing.Options{Clock: clock})
	sealer, err := attemptstate.NewSealer(attemptstate.Keys{Current: testKey(7)}, attemptstate.SealerOptions{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return &rig{srv: NewServer(router, sealer, Options{Clock: clock}), clock: clock, store: st}
}

func (r *rig) route(t *testing.T) *fakeStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	fs := newFakeStream(ctx)
	go func() { _ = newRouteProcessor(r.srv, fs).run() }()
	return fs
}

func (r *rig) attempt(t *testing.T) (*fakeStream, context.CancelFunc, chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	fs := newFakeStream(ctx)
	done := make(chan error, 1)
	go func() { done <- newAttemptProcessor(r.srv, fs).run() }()
	return fs, cancel, done
}

func reqHeaders(eos bool, kv ...string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: hdrs(kv...), EndOfStream: eos}}}
}

func reqBody(b string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: []byte(b), EndOfStream: true}}}
}

func respHeaders(eos bool, kv ...string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: hdrs(kv...), EndOfStream: eos}}}
}

func respBody(b string, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: []byte(b), EndOfStream: eos}}}
}

const chatJSON = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`

func clientHeaders(extra ...string) []string {
	return append([]string{":method", "POST", ":path", "/v1/chat/completions", ":authority", "gw", ":scheme", "http",
		"x-request-id", "req-1", "authorization", "Bearer sk-client", "content-length", "63", "x-envoy-retry-on", "5xx"}, extra...)
}

// set returns the value a mutation sets for name.
func set(hm *extprocv3.HeaderMutation, name string) (string, bool) {
	for _, h := range hm.GetSetHeaders() {
		if h.GetHeader().GetKey() == name {
			return string(h.GetHeader().GetRawValue()), true
		}
	}
	return "", false
}

func removes(hm *extprocv3.HeaderMutation, name string) bool {
	for _, n := range hm.GetRemoveHeaders() {
		if n == name {
			return true
		}
	}
	return false
}

func TestRouteRoleMovesToADeployment(t *testing.T) {
	r := newRig(t)
	fs := r.route(t)
	if a := fs.answer(t, reqHeaders(false, clientHeaders()...)); a.GetRequestHeaders() == nil {
		t.Fatalf("headers answer %v", a)
	}
	a := fs.answer(t, reqBody(chatJSON))
	body := a.GetRequestBody().GetResponse()
	if body == nil || !body.GetClearRouteCache() {
		t.Fatalf("body answer %v", a)
	}
	hm := body.GetHeaderMutation()
	if v, _ := set(hm, contract.HeaderCluster); v != "sy-dep-a" {
		t.Errorf("cluster %q", v)
	}
	if !removes(hm, "authorization") || !removes(hm, "x-envoy-retry-on") {
		t.Errorf("client credentials or x-envoy-* kept: %v", hm.GetRemoveHeaders())
	}
	if v, _ := set(hm, headerTimeout); v != "1800000" {
		t.Errorf("route timeout %q, want totalMs", v)
	}
	if v, _ := set(hm, headerPerTryTimeout); v != "600000" {
		t.Errorf("per-try timeout %q, want responseMs", v)
	}
	sealed := a.GetDynamicMetadata().GetFields()[contract.MetadataNamespace].GetStructValue().GetFields()[metaState].GetStringValue()
	st, err := r.srv.sealer.Open(sealed, "req-1")
	if err != nil {
		t.Fatal(err)
	}
	if cur, _ := st.Current(); cur.Deployment != "a" || st.PublicModel() != "gpt-4o" {
		t.Errorf("state for %q of %q", cur.Deployment, st.PublicModel())
	}
	if v, present, _ := st.SavedHeader("authorization"); !present || string(v) != "Bearer sk-client" {
		t.Errorf("client credential not saved: %q", v)
	}
}

func TestRouteRoleAnswersItself(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers []string
		eos     bool
		body    string
		status  int
		check   func(t *testing.T, body []byte)
	}{
		{"models list", []string{":method", "GET", ":path", "/v1/models", "x-request-id", "r"}, true, "", 200,
			func(t *testing.T, b []byte) {
				if gjson.GetBytes(b, "data.0.id").String() != "gpt-4o" {
					t.Errorf("%s", b)
				}
			}},
		{"unknown path", []string{":method", "POST", ":path", "/v2/x", "x-request-id", "r"}, false, "", 404, nil},
		{"no body", []string{":method", "POST", ":path", "/v1/chat/completions", "x-request-id", "r"}, true, "", 400, nil},
		{"unknown model", clientHeaders(), false, `{"model":"nope","messages":[]}`, 404,
			func(t *testing.T, b []byte) {
				if gjson.GetBytes(b, "error.code").String() != "model_not_found" {
					t.Errorf("%s", b)
				}
			}},
		{"not JSON", clientHeaders(), false, `{{`, 400, nil},
		{"anthropic error shape", []string{":method", "POST", ":path", "/v1/messages", "anthropic-version", "2023-06-01", "x-request-id", "r"}, false,
			`{"model":"nope","max_tokens":1,"messages":[]}`, 404,
			func(t *testing.T, b []byte) {
				if gjson.GetBytes(b, "type").String() != "error" || gjson.GetBytes(b, "error.type").String() != "not_found_error" {
					t.Errorf("%s", b)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			fs := r.route(t)
			a := fs.answer(t, reqHeaders(tc.eos, tc.headers...))
			if a.GetImmediateResponse() == nil {
				a = fs.answer(t, reqBody(tc.body))
			}
			ir := a.GetImmediateResponse()
			if ir == nil || int(ir.GetStatus().GetCode()) != tc.status {
				t.Fatalf("answer %v, want local reply %d", a, tc.status)
			}
			if tc.check != nil {
				tc.check(t, ir.GetBody())
			}
		})
	}
}

func TestRouteRoleReentryRestoresClientHeaders(t *testing.T) {
	r := newRig(t,
		&configv1.Deployment{Id: "a", PublicModel: "gpt-4o", Provider: "openai", BaseUrl: "https://a.example", ProviderModel: "m"},
		&configv1.Deployment{Id: "b", PublicModel: "gpt-4o", Provider: "openai", BaseUrl: "https://b.example", ProviderModel: "m"})
	// A state as the attempt role leaves it after a 500 on a.
	req := routing.Request{ID: "req-1", Model: "gpt-4o", Start: t0}
	st := attemptstate.New(&req, dialect.Chat, t0.Add(30*time.Minute))
	st.SaveHeader("authorization", []byte("Bearer sk-client"), true)
	st.SaveHeader("content-length", []byte("63"), true)
	st.SaveHeader("api-key", nil, false)
	finishAttempt(t, st, &routing.Attempt{Deployment: "a", Model: "gpt-4o", Status: 500, Class: failure.ClassTransient, Kind: failure.KindServerError})
	sealed, err := r.srv.sealer.Seal(st)
	if err != nil {
		t.Fatal(err)
	}
	fs := r.route(t)
	// Envoy rebuilt the request from the headers as shipped to a: a's key, a's length.
	fs.answer(t, reqHeaders(false, ":method", "POST", ":path", "/v1/chat/completions", ":authority", "gw", ":scheme", "http",
		"x-request-id", "req-1", "authorization", "Bearer sk-provider-a", "content-length", "70", contract.HeaderState, sealed,
		"x-envoy-original-url", "https://a.example/v1/chat/completions"))
	a := fs.answer(t, reqBody(chatJSON))
	hm := a.GetRequestBody().GetResponse().GetHeaderMutation()
	if v, _ := set(hm, contract.HeaderCluster); v != "sy-dep-b" {
		t.Errorf("cluster %q, want failover to b", v)
	}
	if v, _ := set(hm, "content-length"); v != "63" {
		t.Errorf("content-length %q, want the client's", v)
	}
	if !removes(hm, "authorization") || !removes(hm, contract.HeaderState) || !removes(hm, "x-envoy-original-url") {
		t.Errorf("removals %v", hm.GetRemoveHeaders())
	}
	if _, ok := set(hm, "authorization"); ok {
		t.Error("a credential was set on the request")
	}
}

func TestRouteRoleStopsWithRetryAfter(t *testing.T) {
	r := newRig(t)
	// Open a's circuit: 4 transient failures within the window (allowedFails 3).
	d := r.srv.router.Config().Deployments["a"]
	for i := 0; i < 4; i++ {
		req := routing.Request{ID: "old-" + string(rune('a'+i)), Model: "gpt-4o", Start: t0}
		_, _ = r.srv.router.FinishAttempt(context.Background(), &req, d, "x", routing.Result{Classification: classTransient()})
	}
	fs := r.route(t)
	fs.answer(t, reqHeaders(false, clientHeaders()...))
	ir := fs.answer(t, reqBody(chatJSON)).GetImmediateResponse()
	if ir == nil || ir.GetStatus().GetCode() != 503 {
		t.Fatalf("answer %v", ir)
	}
	if v, ok := set(ir.GetHeaders(), "retry-after"); !ok || v != "5" {
		t.Errorf("retry-after %q, want the cooldown's 5 s", v)
	}
	if gjson.GetBytes(ir.GetBody(), "error.code").String() != "model_overloaded" {
		t.Errorf("body %s", ir.GetBody())
	}
}

// attemptState seals the state the route role hands the attempt role for deployment id.
func (r *rig) attemptState(t *testing.T, id string) (*corev3.Metadata, map[string]*structpb.Struct) {
	return r.attemptStateOf(t, id, false)
}

func (r *rig) attemptStateOf(t *testing.T, id string, stream bool) (*corev3.Metadata, map[string]*structpb.Struct) {
	t.Helper()
	req := routing.Request{ID: "req-1", Model: "gpt-4o", Start: t0, Stream: stream}
	st := attemptstate.New(&req, dialect.Chat, t0.Add(30*time.Minute))
	st.SaveHeader(":scheme", []byte("http"), true)
	st.SaveHeader(":authority", []byte("gw"), true)
	st.SaveHeader(":path", []byte("/v1/chat/completions"), true)
	dec := routing.Decision{Deployment: r.srv.router.Config().Deployments[id], Model: "gpt-4o"}
	st.Begin(&dec, "req-1/1/x", t0)
	sealed, err := r.srv.sealer.Seal(st)
	if err != nil {
		t.Fatal(err)
	}
	md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{contract.MetadataNamespace: {Fields: map[string]*structpb.Value{
		metaState: structpb.NewStringValue(sealed)}}}}
	attrs := map[string]*structpb.Struct{attributesFilterName: {Fields: map[string]*structpb.Value{
		contract.AttributeClusterName: structpb.NewStringValue(contract.ClusterName(id))}}}
	return md, attrs
}

func (r *rig) inFlight(t *testing.T, id string) int64 {
	t.Helper()
	out := make([]store.DeploymentState, 1)
	if err := r.store.ReadStates(context.Background(), r.clock.Now(), []store.DeploymentRef{{ID: id, Domain: store.DomainOf(id, "")}}, out); err != nil {
		t.Fatal(err)
	}
	return out[0].Metrics.InFlight
}

func attemptHeaders1(md *corev3.Metadata, attrs map[string]*structpb.Struct, extra ...string) *extprocv3.ProcessingRequest {
	m := reqHeaders(false, append([]string{":method", "POST", ":path", "/v1/chat/completions", ":authority", "gw", ":scheme", "http",
		"x-request-id", "req-1", "content-length", "63"}, extra...)...)
	m.MetadataContext, m.Attributes = md, attrs
	return m
}

func TestAttemptRoleRewritesAndPassesASuccess(t *testing.T) {
	r := newRig(t)
	md, attrs := r.attemptState(t, "a")
	fs, _, done := r.attempt(t)
	fs.answer(t, attemptHeaders1(md, attrs, HeaderRoutingMetadata, "true"))
	if n := r.inFlight(t, "a"); n != 1 {
		t.Errorf("in flight %d after the request headers", n)
	}
	a := fs.answer(t, reqBody(chatJSON))
	c := a.GetRequestBody().GetResponse()
	hm := c.GetHeaderMutation()
	if v, _ := set(hm, ":path"); v != "/v1/chat/completions" {
		t.Errorf(":path %q", v)
	}
	if v, _ := set(hm, ":authority"); v != "api.openai.com" {
		t.Errorf(":authority %q", v)
	}
	if v, _ := set(hm, "authorization"); v != "Bearer sk-provider-a" {
		t.Errorf("authorization %q", v)
	}
	newBody := c.GetBodyMutation().GetBody()
	if gjson.GetBytes(newBody, "model").String() != "gpt-4o-2024" {
		t.Errorf("body %s", newBody)
	}
	if v, _ := set(hm, "content-length"); v != itoa(len(newBody)) {
		t.Errorf("content-length %q for %d bytes", v, len(newBody))
	}
	if !a.GetDynamicMetadata().GetFields()[contract.MetadataNamespace].GetStructValue().GetFields()[metaSent].GetBoolValue() {
		t.Error("no sent mark")
	}
	fs.in <- respHeaders(false, ":status", "200", "content-type", "application/json")
	fs.none(t) // held until the body is in
	h := fs.answer(t, respBody(`{"id":"x","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`, true))
	if h.GetResponseHeaders() == nil {
		t.Fatalf("answer %v", h)
	}
	if _, ok := set(h.GetResponseHeaders().GetResponse().GetHeaderMutation(), ":status"); ok {
		t.Error("a success was redirected")
	}
	b := fs.next(t).GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse()
	if !b.GetEndOfStream() || gjson.GetBytes(b.GetBody(), "unified_routing.deployment").String() != "a" {
		t.Errorf("body %s", b.GetBody())
	}
	close(fs.in)
	<-done
	if n := r.inFlight(t, "a"); n != 0 {
		t.Errorf("in flight %d after the attempt", n)
	}
}

func TestAttemptRoleRedirectsAFailure(t *testing.T) {
	r := newRig(t)
	md, attrs := r.attemptState(t, "a")
	fs, _, _ := r.attempt(t)
	fs.answer(t, attemptHeaders1(md, attrs))
	fs.answer(t, reqBody(chatJSON))
	fs.in <- respHeaders(false, ":status", "503", "content-type", "application/json", "retry-after", "2")
	h := fs.answer(t, respBody(`{"error":{"message":"busy","type":"server_error"}}`, true))
	hm := h.GetResponseHeaders().GetResponse().GetHeaderMutation()
	if v, _ := set(hm, ":status"); v != "307" {
		t.Fatalf("status %q", v)
	}
	if v, _ := set(hm, "location"); v != "http://gw/v1/chat/completions" {
		t.Errorf("location %q", v)
	}
	sealed, _ := set(hm, contract.HeaderState)
	st, err := r.srv.sealer.Open(sealed, "req-1")
	if err != nil {
		t.Fatal(err)
	}
	if h := historyOf(t, st); len(h.Attempts) != 1 || h.Attempts[0].Status != 503 || h.Attempts[0].RetryAfter != 2*time.Second {
		t.Errorf("attempts %+v", h.Attempts)
	}
	end := fs.next(t).GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse()
	if !end.GetEndOfStream() || len(end.GetBody()) != 0 {
		t.Errorf("the drained body must end empty: %v", end)
	}
}

func TestAttemptRoleClusterMismatchNeverCallsWithCredentials(t *testing.T) {
	r := newRig(t,
		&configv1.Deployment{Id: "a", PublicModel: "gpt-4o", Provider: "openai", BaseUrl: "https://a.example", ProviderModel: "m"},
		&configv1.Deployment{Id: "b", PublicModel: "gpt-4o", Provider: "openai", BaseUrl: "https://b.example", ProviderModel: "m"})
	md, _ := r.attemptState(t, "a")
	attrs := map[string]*structpb.Struct{attributesFilterName: {Fields: map[string]*structpb.Value{
		contract.AttributeClusterName: structpb.NewStringValue(contract.ClusterName("b"))}}}
	fs, _, _ := r.attempt(t)
	fs.answer(t, attemptHeaders1(md, attrs, "authorization", "Bearer leaked"))
	c := fs.answer(t, reqBody(chatJSON)).GetRequestBody().GetResponse()
	if !removes(c.GetHeaderMutation(), "authorization") || len(c.GetBodyMutation().GetBody()) != 0 {
		t.Errorf("mismatch answer %v", c)
	}
	if v, _ := set(c.GetHeaderMutation(), "authorization"); v != "" {
		t.Errorf("a key was set: %q", v)
	}
	if r.inFlight(t, "a")+r.inFlight(t, "b") != 0 {
		t.Error("a mismatched attempt was started")
	}
	h := fs.answer(t, respHeaders(true, ":status", "401"))
	hm := h.GetResponseHeaders().GetResponse().GetHeaderMutation()
	sealed, _ := set(hm, contract.HeaderState)
	st, err := r.srv.sealer.Open(sealed, "req-1")
	if err != nil {
		t.Fatal(err)
	}
	if h := historyOf(t, st); len(h.Attempts) != 1 || h.Attempts[0].Class != failure.ClassGateway {
		t.Errorf("attempts %+v, want one gateway failure", h.Attempts)
	}
}

func TestAttemptRoleCancelReleasesWithoutVerdict(t *testing.T) {
	r := newRig(t)
	md, attrs := r.attemptState(t, "a")
	fs, cancel, done := r.attempt(t)
	fs.answer(t, attemptHeaders1(md, attrs))
	fs.answer(t, reqBody(chatJSON))
	cancel() // Envoy reset the stream: a connect failure or a client cancel
	<-done
	if n := r.inFlight(t, "a"); n != 0 {
		t.Errorf("in flight %d after the cancel", n)
	}
	out := make([]store.DeploymentState, 1)
	_ = r.store.ReadStates(context.Background(), r.clock.Now(), []store.DeploymentRef{{ID: "a", Domain: store.DomainOf("a", "")}}, out)
	if out[0].Metrics.Failures != 0 || out[0].Circuit.Failures != 0 {
		t.Errorf("a cancel counted as a failure: %+v", out[0])
	}
}

// The trampoline attempt gets the state and the sent mark as the published attempt filter
// asks for them, as request attributes, with no forwarded metadata (the other attempt tests
// use the forwarded namespace of an older static configuration).
func TestAttemptRoleTrampolineAttemptForwardsTheState(t *testing.T) {
	r := newRig(t)
	md, attrs := r.attemptState(t, "a")
	fields := attrs[attributesFilterName].Fields
	fields[contract.AttributeTrampoline] = structpb.NewBoolValue(true)
	fields[contract.AttributeState] = md.FilterMetadata[contract.MetadataNamespace].Fields[metaState]
	fields[contract.AttributeSent] = structpb.NewBoolValue(true)
	fs, _, _ := r.attempt(t)
	fs.answer(t, attemptHeaders1(nil, attrs, "authorization", "Bearer sk-provider-a"))
	c := fs.answer(t, reqBody(chatJSON)).GetRequestBody().GetResponse()
	hm := c.GetHeaderMutation()
	if v, _ := set(hm, ":path"); v != TrampolinePath {
		t.Errorf(":path %q", v)
	}
	if v, _ := set(hm, contract.HeaderState); v == "" {
		t.Error("no state for the trampoline")
	}
	if v, _ := set(hm, HeaderTransport); v != itoa(2) { // failure.TransportReset
		t.Errorf("transport %q, want reset (sent, before the per-try timeout)", v)
	}
	if !removes(hm, "authorization") {
		t.Error("the provider key went to the trampoline")
	}
	if r.inFlight(t, "a") != 0 {
		t.Error("the trampoline attempt counted in flight")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func classTransient() failure.Classification {
	return failure.Classification{Class: failure.ClassTransient, Kind: failure.KindServerError, Status: 500}
}

// TestRouteRoleStopsAtTheRedirectBudget: with no internal redirect left the route role
// answers with what the last upstream said instead of scheduling an attempt whose failure
// could only reach the client as a 307.
func TestRouteRoleStopsAtTheRedirectBudget(t *testing.T) {
	r := newRig(t)
	req := routing.Request{ID: "req-1", Model: "gpt-4o", Start: t0}
	st := attemptstate.New(&req, dialect.Chat, t0.Add(30*time.Minute))
	finishAttempt(t, st, &routing.Attempt{Deployment: "a", Model: "gpt-4o", Status: 503, Class: failure.ClassTransient,
		Kind: failure.KindOverloaded, Message: "busy upstream"})
	for st.Redirects() < r.srv.opts.MaxRedirects-1 { // the route role counts this re-entry
		st.Redirect()
	}
	sealed, err := r.srv.sealer.Seal(st)
	if err != nil {
		t.Fatal(err)
	}
	fs := r.route(t)
	fs.answer(t, reqHeaders(false, append(clientHeaders(), contract.HeaderState, sealed)...))
	ir := fs.answer(t, reqBody(chatJSON)).GetImmediateResponse()
	if ir == nil || ir.GetStatus().GetCode() != 503 || !strings.Contains(string(ir.GetBody()), "busy upstream") {
		t.Fatalf("answer %v, want the last upstream's 503", ir)
	}
}

const chunkContent = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n"
const chunkRole = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n"

// startStreamAttempt drives an attempt of a streamed chat request to its held 200 headers.
func (r *rig) startStreamAttempt(t *testing.T) *fakeStream {
	t.Helper()
	md, attrs := r.attemptStateOf(t, "a", true)
	fs, _, _ := r.attempt(t)
	fs.answer(t, attemptHeaders1(md, attrs))
	fs.answer(t, reqBody(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	fs.in <- respHeaders(false, ":status", "200", "content-type", "text/event-stream")
	return fs
}

// waitTimer waits until the attempt role armed its stream timer on the fake clock.
func (r *rig) waitTimer(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.clock.Waiting() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no stream timer armed")
		}
		time.Sleep(time.Millisecond) // the processor's goroutine arms it
	}
}

// TestCommitEmptiesTheForwardedState: the answer that commits a stream also empties the
// sealed state in switchyard's metadata namespace, which Envoy would otherwise forward with
// every later chunk; the sent mark stays.
func TestCommitEmptiesTheForwardedState(t *testing.T) {
	r := newRig(t)
	fs := r.startStreamAttempt(t)
	fs.in <- respBody(chunkRole, false) // held: no output yet
	fs.in <- respBody(chunkContent, false)
	h := fs.next(t)
	if h.GetResponseHeaders() == nil {
		t.Fatalf("commit: %v", h)
	}
	ns := h.GetDynamicMetadata().GetFields()[contract.MetadataNamespace].GetStructValue().GetFields()
	if v, ok := ns[metaState]; !ok || v.GetStringValue() != "" {
		t.Fatalf("the commit answer's metadata %v, want the state emptied", h.GetDynamicMetadata())
	}
	if _, ok := ns[metaSent]; ok {
		t.Errorf("the commit answer rewrites the sent mark: %v", ns)
	}
}

// TestAttemptRoleStreamDeadlineAfterCommit: a committed stream still open at the request's
// deadline ends with an in-band timeout error 0.5 s before Envoy's route timeout would cut it.
func TestAttemptRoleStreamDeadlineAfterCommit(t *testing.T) {
	r := newRig(t)
	fs := r.startStreamAttempt(t)
	fs.in <- respBody(chunkContent, false)
	if h := fs.next(t); h.GetResponseHeaders() == nil {
		t.Fatalf("commit: %v", h)
	}
	if b := fs.next(t).GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse(); string(b.GetBody()) != chunkContent {
		t.Fatalf("released %q", b.GetBody())
	}
	// Keepalives every 500 s keep the stream inside its idle timeout (600 s) until the
	// deadline (30 min, minus the margin) ends it.
	for i := 0; i < 3; i++ {
		r.waitTimer(t)
		r.clock.Advance(500 * time.Second)
		fs.in <- respBody(": keepalive\n\n", false)
		if b := fs.next(t).GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse(); string(b.GetBody()) != ": keepalive\n\n" {
			t.Fatalf("keepalive passed as %q", b.GetBody())
		}
	}
	r.waitTimer(t)
	r.clock.Advance(300*time.Second - deadlineMargin)
	end := fs.next(t).GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse()
	if !end.GetEndOfStream() || !strings.Contains(string(end.GetBody()), `"code":"timeout"`) || !strings.Contains(string(end.GetBody()), "req-1") {
		t.Fatalf("end of the stream %q (eos %v), want an error event with the request id", end.GetBody(), end.GetEndOfStream())
	}
}

// TestAttemptRoleStreamStallBeforeCommitFailsOver: a stream that sends only a role delta and
// then goes silent for idleMs becomes the 307 back to the route role; the client saw nothing.
func TestAttemptRoleStreamStallBeforeCommitFailsOver(t *testing.T) {
	r := newRig(t)
	fs := r.startStreamAttempt(t)
	fs.in <- respBody(chunkRole, false)
	// Nothing released: the role delta is held (the next answer being the 307 proves it).
	r.waitTimer(t)
	r.clock.Advance(601 * time.Second) // idleMs of the default text stream policy: 600 s
	h := fs.next(t)
	if v, _ := set(h.GetResponseHeaders().GetResponse().GetHeaderMutation(), ":status"); v != "307" {
		t.Fatalf("answer %v, want the 307", h)
	}
}
