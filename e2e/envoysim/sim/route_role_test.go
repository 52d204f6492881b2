package sim_test

import (
	"strings"
	"testing"

	epv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

const routeRoleMode = `request_header_mode: SEND, request_body_mode: BUFFERED, response_header_mode: SKIP, response_body_mode: NONE`

// The route role's request body answer sets the cluster_header with
// clear_route_cache; the router then picks that cluster. Also checks the ext_proc
// wire details (docs/design.md §6 items 1-2): one stream, protocol_config on the first message only,
// lower-case keys in raw_value with pseudo-headers, initial metadata, end_of_stream,
// and that the stream is closed once no more processing is needed.
func TestClusterHeaderRoutingWithClearRouteCache(t *testing.T) {
	ps := newProcServer(t)
	a := newUpstream(t, nil)
	b := newUpstream(t, nil)
	e := start(t, cfg{
		procAddr: ps.addr,
		filters:  []string{extProcYAML("route", routeRoleMode)},
		clusters: []string{clusterYAML("a", "", []string{endpointYAML(a.addr(), "")}), clusterYAML("b", "", []string{endpointYAML(b.addr(), "")})},
	})
	res := e.do("POST", "/v1/chat?x=1", `{"model":"m"}`, "Content-Type", "application/json", "X-Cluster", "a")

	st := ps.next(t, "route")
	if got := st.md.Get("x-role"); len(got) != 1 || got[0] != "route" {
		t.Fatalf("initial metadata %v", st.md)
	}
	m1 := st.Recv(t)
	pc := m1.GetProtocolConfig()
	if pc == nil || pc.GetRequestBodyMode() != epv3.ProcessingMode_BUFFERED || pc.GetResponseBodyMode() != epv3.ProcessingMode_NONE {
		t.Fatalf("protocol_config %v", pc)
	}
	h := hdrs(m1)
	if h[":path"] != "/v1/chat?x=1" || h[":method"] != "POST" || h["content-type"] != "application/json" || h["x-cluster"] != "a" || h["content-length"] != "13" {
		t.Fatalf("request headers %v", h)
	}
	if m1.GetRequestHeaders().GetEndOfStream() {
		t.Fatal("end_of_stream on headers of a request with a body")
	}
	for _, hv := range m1.GetRequestHeaders().GetHeaders().GetHeaders() {
		if hv.GetValue() != "" || hv.GetKey() != strings.ToLower(hv.GetKey()) {
			t.Fatalf("header %v: want lower-case key and raw_value only", hv)
		}
	}
	st.Send(t, reqHeadersResp(nil))
	m2 := st.Recv(t)
	if m2.GetProtocolConfig() != nil {
		t.Fatal("protocol_config on a second message")
	}
	if string(m2.GetRequestBody().GetBody()) != `{"model":"m"}` || !m2.GetRequestBody().GetEndOfStream() {
		t.Fatalf("body message %v", m2)
	}
	c := common(setHeaders("x-cluster", "b"))
	c.ClearRouteCache = true
	st.Send(t, reqBodyResp(c))

	r := await(t, res)
	mustOK(t, r, 200)
	got := b.next(t)
	if got.Body != `{"model":"m"}` || got.Header.Get("X-Cluster") != "b" || got.Path != "/v1/chat?x=1" {
		t.Fatalf("upstream b got %+v", got)
	}
	if got.Header.Get("X-Request-Id") == "" || got.Header.Get("X-Forwarded-Proto") != "http" {
		t.Fatalf("HCM headers missing: %v", got.Header)
	}
	a.none(t)
	if r.resp.Header.Get("Server") != "envoy" || r.resp.Header.Get("X-Envoy-Upstream-Service-Time") == "" {
		t.Fatalf("response headers %v", r.resp.Header)
	}
	// Response headers SKIP and body NONE: nothing more to process, Envoy closes (resets)
	// the stream at the latest when the filter is destroyed.
	if err := st.WaitEnd(t); grpcCode(err) != "Canceled" {
		t.Fatalf("stream end %v, want Canceled", err)
	}
	l := e.nextLog()
	if l.ResponseCode != 200 || l.UpstreamCluster != "b" || l.Attempts != 1 {
		t.Fatalf("access log %+v", l)
	}
}

// clear_route_cache only acts with a header mutation in the same response
// (DecodingProcessorState::clearRouteCache); without one the cached route - computed
// from the original headers - stays, even though the cluster header changed.
func TestClearRouteCacheWithoutHeaderMutationIgnored(t *testing.T) {
	ps := newProcServer(t)
	a := newUpstream(t, nil)
	b := newUpstream(t, nil)
	e := start(t, cfg{
		procAddr: ps.addr,
		filters:  []string{extProcYAML("route", routeRoleMode)},
		clusters: []string{clusterYAML("a", "", []string{endpointYAML(a.addr(), "")}), clusterYAML("b", "", []string{endpointYAML(b.addr(), "")})},
	})
	res := e.do("POST", "/", "body", "X-Cluster", "a")
	st := ps.next(t, "route")
	st.Recv(t)
	// Header changed, but no clear_route_cache.
	st.Send(t, reqHeadersResp(common(setHeaders("x-cluster", "b"))))
	st.Recv(t)
	// clear_route_cache without a header mutation: ignored.
	st.Send(t, reqBodyResp(&extprocv3.CommonResponse{ClearRouteCache: true}))
	mustOK(t, await(t, res), 200)
	got := a.next(t)
	if got.Header.Get("X-Cluster") != "b" {
		t.Fatalf("upstream a got x-cluster %q", got.Header.Get("X-Cluster"))
	}
	b.none(t)
}

// route_cache_action: CLEAR clears on any response with a header mutation; the
// response direction never clears.
func TestRouteCacheActionClear(t *testing.T) {
	ps := newProcServer(t)
	a := newUpstream(t, nil)
	b := newUpstream(t, nil)
	e := start(t, cfg{
		procAddr: ps.addr,
		filters:  []string{extProcYAML("route", routeRoleMode, "route_cache_action: CLEAR")},
		clusters: []string{clusterYAML("a", "", []string{endpointYAML(a.addr(), "")}), clusterYAML("b", "", []string{endpointYAML(b.addr(), "")})},
	})
	res := e.do("POST", "/", "body", "X-Cluster", "a")
	st := ps.next(t, "route")
	st.Recv(t)
	st.Send(t, reqHeadersResp(common(setHeaders("x-cluster", "b"))))
	st.Recv(t)
	st.Send(t, reqBodyResp(nil))
	mustOK(t, await(t, res), 200)
	b.next(t)
	a.none(t)
}
