package sim_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	epv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
)

// FULL_DUPLEX_STREAMED on the response of an upstream filter: body chunks go to the
// server while the headers answer is pending, the response headers are held (the
// client gets nothing, the router cannot commit) until the server answers them, and
// only bytes from streamed_response reach the client (docs/design.md §6 item 6, docs/design.md §4).
func TestFullDuplexHoldsResponseHeaders(t *testing.T) {
	ps := newProcServer(t)
	a := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ *recorded) {
		w.Header().Set("content-type", "text/event-stream")
		w.Header().Set("content-length", "18")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "data: 2\n\n")
	})
	up := extProcYAML("attempt", `request_header_mode: SKIP, response_header_mode: SEND, response_body_mode: FULL_DUPLEX_STREAMED, response_trailer_mode: SEND`)
	e := start(t, cfg{procAddr: ps.addr, clusters: []string{clusterYAML("a", upstreamFiltersYAML(up), []string{endpointYAML(a.addr(), "")})}})

	gotHeaders := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest("GET", e.url+"/stream", nil)
		req.Header.Set("X-Cluster", "a")
		resp, err := (&http.Client{Timeout: wait}).Do(req)
		if err == nil {
			gotHeaders <- resp
		}
	}()

	st := ps.next(t, "attempt")
	m := st.Recv(t)
	if m.GetProtocolConfig().GetResponseBodyMode() != epv3.ProcessingMode_FULL_DUPLEX_STREAMED || hdrs(m)[":status"] != "200" {
		t.Fatalf("first message %v", m)
	}
	var body string
	for {
		m := st.Recv(t)
		rb := m.GetResponseBody()
		if rb == nil {
			t.Fatalf("expected a response body chunk, got %v", m)
		}
		body += string(rb.GetBody())
		if rb.GetEndOfStream() {
			break
		}
	}
	if body != "data: 1\n\ndata: 2\n\n" {
		t.Fatalf("server saw body %q", body)
	}
	select {
	case <-gotHeaders:
		t.Fatal("response headers reached the client before the server answered them")
	case <-time.After(200 * time.Millisecond):
	}
	st.Send(t, respHeadersResp(common(setHeaders("x-held", "yes"))))
	st.Send(t, respBodyResp(streamedBody("DATA1", false)))
	st.Send(t, respBodyResp(streamedBody("DATA2", true)))

	var resp *http.Response
	select {
	case resp = <-gotHeaders:
	case <-time.After(wait):
		t.Fatal("no response")
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || string(b) != "DATA1DATA2" || resp.Header.Get("X-Held") != "yes" || resp.ContentLength != -1 {
		t.Fatalf("client got %q (%v) headers %v cl %d", b, err, resp.Header, resp.ContentLength)
	}
	// The last response of the stream was received: Envoy closes it at once.
	if err := st.WaitEnd(t); grpcCode(err) != "Canceled" {
		t.Fatalf("stream end %v", err)
	}
	a.next(t)
}

// A 307 made by an upstream ext_proc becomes an internal redirect: a NEW downstream
// stream through the whole filter chain (fresh ext_proc gRPC stream), built from the
// request headers as shipped to the previous upstream (after the upstream filter's
// rewrites), with x-envoy-original-url, the copied response header and the buffered
// body replayed ("Internal redirects", http_connection_management.rst).
func TestInternalRedirectFromUpstreamFilter(t *testing.T) {
	ps := newProcServer(t)
	a := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ *recorded) {
		w.WriteHeader(500)
		_, _ = io.WriteString(w, "provider failed")
	})
	b := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ *recorded) {
		_, _ = io.WriteString(w, "from b")
	})
	up := extProcYAML("attempt", `request_header_mode: SEND, response_header_mode: SEND`, "mutation_rules: {allow_all_routing: true}")
	e := start(t, cfg{
		procAddr: ps.addr,
		filters:  []string{extProcYAML("route", routeRoleMode)},
		route:    `timeout: 0s, internal_redirect_policy: {max_internal_redirects: 3, redirect_response_codes: [307], response_headers_to_copy: [x-state]}`,
		clusters: []string{
			clusterYAML("a", upstreamFiltersYAML(up), []string{endpointYAML(a.addr(), "")}),
			clusterYAML("b", "", []string{endpointYAML(b.addr(), "")}),
		},
	})
	host := strings.TrimPrefix(e.url, "http://")
	res := e.do("POST", "/v1/chat", `{"m":1}`, "Authorization", "Bearer client-key", "X-State", "forged")

	// Pass 1: the route role picks cluster a.
	r1 := ps.next(t, "route")
	if h := hdrs(r1.Recv(t)); h["authorization"] != "Bearer client-key" {
		t.Fatalf("pass 1 headers %v", h)
	}
	r1.Send(t, reqHeadersResp(nil))
	r1.Recv(t)
	c := common(setHeaders("x-cluster", "a"))
	c.ClearRouteCache = true
	r1.Send(t, reqBodyResp(c))

	// The attempt role rewrites the request for the provider...
	at := ps.next(t, "attempt")
	at.Recv(t)
	at.Send(t, reqHeadersResp(common(setHeaders(":path", "/provider/chat", ":authority", "provider.example", "authorization", "Bearer provider-key"))))
	got := a.next(t)
	if got.Path != "/provider/chat" || got.Host != "provider.example" || got.Header.Get("Authorization") != "Bearer provider-key" || got.Body != `{"m":1}` {
		t.Fatalf("provider got %+v", got)
	}
	// ...and turns the provider's failure into a 307 with updated state.
	if h := hdrs(at.Recv(t)); h[":status"] != "500" {
		t.Fatalf("attempt response headers %v", h)
	}
	at.Send(t, respHeadersResp(common(setHeaders(":status", "307", "location", "http://"+host+"/v1/chat", "x-state", "s1"))))

	// Pass 2: a fresh route-role stream sees the shipped headers.
	r2 := ps.next(t, "route")
	h := hdrs(r2.Recv(t))
	want := map[string]string{
		":path":                 "/v1/chat",
		":authority":            host,
		":method":               "POST",
		"authorization":         "Bearer provider-key",
		"x-state":               "s1",
		"x-envoy-original-url":  "http://provider.example/provider/chat",
		"x-cluster":             "a",
		"x-envoy-attempt-count": "1",
	}
	for k, v := range want {
		if h[k] != v {
			t.Fatalf("pass 2 header %s = %q, want %q (all: %v)", k, h[k], v, h)
		}
	}
	r2.Send(t, reqHeadersResp(common(setHeaders("authorization", "Bearer client-key"))))
	m := r2.Recv(t)
	if string(m.GetRequestBody().GetBody()) != `{"m":1}` || !m.GetRequestBody().GetEndOfStream() {
		t.Fatalf("replayed body %v", m)
	}
	c = common(setHeaders("x-cluster", "b"))
	c.ClearRouteCache = true
	r2.Send(t, reqBodyResp(c))

	r := await(t, res)
	mustOK(t, r, 200)
	if r.body != "from b" {
		t.Fatalf("client got %q", r.body)
	}
	gb := b.next(t)
	if gb.Body != `{"m":1}` || gb.Header.Get("Authorization") != "Bearer client-key" || gb.Header.Get("X-State") != "s1" {
		t.Fatalf("b got %+v", gb)
	}
	// Pass 1's streams were ended when the stream was recreated.
	if err := r1.WaitEnd(t); grpcCode(err) != "Canceled" {
		t.Fatalf("pass 1 route stream end %v", err)
	}
	if err := at.WaitEnd(t); grpcCode(err) != "Canceled" {
		t.Fatalf("attempt stream end %v", err)
	}
	if l := e.nextLog(); !l.InternalRedirect {
		t.Fatalf("first pass log %+v", l)
	}
	if l := e.nextLog(); l.ResponseCode != 200 || l.UpstreamCluster != "b" {
		t.Fatalf("second pass log %+v", l)
	}
}

// A redirect is passed downstream when it cannot be followed: request body over the
// buffer limit, relative location, or max_internal_redirects reached.
func TestInternalRedirectConditions(t *testing.T) {
	var n atomic.Int32
	a := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ *recorded) {
		n.Add(1)
		loc := "http://" + r.Host + "/again"
		switch r.URL.Path {
		case "/relative":
			loc = "/again"
		case "/https":
			loc = "https://" + r.Host + "/again"
		}
		w.Header().Set("location", loc)
		w.WriteHeader(307)
	})
	e := start(t, cfg{
		routeFields: "request_body_buffer_limit: 16",
		route:       `timeout: 0s, internal_redirect_policy: {max_internal_redirects: 2, redirect_response_codes: [307]}`,
		clusters:    []string{clusterYAML("a", "", []string{endpointYAML(a.addr(), "")})},
	})
	// Body larger than the route's buffer limit: not buffered, so not redirected.
	mustOK(t, await(t, e.do("POST", "/big", strings.Repeat("x", 64), "X-Cluster", "a")), 307)
	if n.Load() != 1 {
		t.Fatalf("upstream calls %d", n.Load())
	}
	// Relative location: not a valid absolute URL.
	mustOK(t, await(t, e.do("GET", "/relative", "", "X-Cluster", "a")), 307)
	// https from an http request without allow_cross_scheme_redirect.
	mustOK(t, await(t, e.do("GET", "/https", "", "X-Cluster", "a")), 307)
	// Valid redirects: followed twice, the third 307 goes to the client.
	n.Store(0)
	r := await(t, e.do("GET", "/loop", "", "X-Cluster", "a"))
	mustOK(t, r, 307)
	if n.Load() != 3 {
		t.Fatalf("upstream calls %d, want 3 (max_internal_redirects 2)", n.Load())
	}
}

// Upstream filters run once per attempt (one gRPC stream each) after the host was
// chosen: request_attributes give the host's metadata, the cluster and the attempt
// count, and x-envoy-attempt-count is already updated (docs/design.md §6 items 1, 15).
func TestUpstreamFilterPerAttemptAttributes(t *testing.T) {
	ps := newProcServer(t)
	var n atomic.Int32
	a := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ *recorded) {
		if n.Add(1) == 1 {
			w.WriteHeader(503)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	up := extProcYAML("attempt", `request_header_mode: SEND, response_header_mode: SKIP`,
		`request_attributes: ["xds.upstream_host_metadata.filter_metadata['llm']['deployment']", "xds.cluster_name", "upstream.request_attempt_count"]`)
	e := start(t, cfg{procAddr: ps.addr,
		route: `retry_policy: {retry_on: "5xx", num_retries: 1, retry_back_off: {base_interval: 0.001s}}`,
		clusters: []string{clusterYAML("a", upstreamFiltersYAML(up),
			[]string{endpointYAML(a.addr(), `metadata: {filter_metadata: {llm: {deployment: d1}}}`)})},
	})
	res := e.do("GET", "/", "", "X-Cluster", "a")
	for attempt := 1; attempt <= 2; attempt++ {
		st := ps.next(t, "attempt")
		m := st.Recv(t)
		attrs := m.GetAttributes()["envoy.filters.http.ext_proc"].GetFields()
		if attrs["xds.upstream_host_metadata.filter_metadata['llm']['deployment']"].GetStringValue() != "d1" ||
			attrs["xds.cluster_name"].GetStringValue() != "a" ||
			attrs["upstream.request_attempt_count"].GetNumberValue() != float64(attempt) {
			t.Fatalf("attempt %d attributes %v", attempt, attrs)
		}
		if hdrs(m)["x-envoy-attempt-count"] != string(rune('0'+attempt)) {
			t.Fatalf("attempt %d headers %v", attempt, hdrs(m))
		}
		st.Send(t, reqHeadersResp(nil))
		if err := st.WaitEnd(t); grpcCode(err) != "Canceled" {
			t.Fatalf("attempt %d stream end %v", attempt, err)
		}
	}
	mustOK(t, await(t, res), 200)
}

// CONTINUE_AND_REPLACE in an upstream filter's request headers answer replaces the
// replayed body per attempt (the ai-gateway per-attempt rewrite primitive).
func TestUpstreamContinueAndReplace(t *testing.T) {
	ps := newProcServer(t)
	a := newUpstream(t, nil)
	up := extProcYAML("attempt", `request_header_mode: SEND, response_header_mode: SKIP`)
	e := start(t, cfg{procAddr: ps.addr, clusters: []string{clusterYAML("a", upstreamFiltersYAML(up), []string{endpointYAML(a.addr(), "")})}})
	res := e.do("POST", "/", `{"model":"public"}`, "X-Cluster", "a")
	st := ps.next(t, "attempt")
	st.Recv(t)
	c := common(setHeaders("x-rewritten", "1"))
	c.Status = 1 // CONTINUE_AND_REPLACE
	c.BodyMutation = replaceBody(`{"model":"provider-model"}`)
	st.Send(t, reqHeadersResp(c))
	mustOK(t, await(t, res), 200)
	got := a.next(t)
	if got.Body != `{"model":"provider-model"}` || got.Header.Get("X-Rewritten") != "1" {
		t.Fatalf("upstream got %q %v", got.Body, got.Header)
	}
}

// The retry decision uses the response headers as they leave the upstream filter
// chain: an upstream filter holding the headers and answering :status 503 makes the
// router retry (docs/design.md §4, router.cc onUpstreamHeaders); a :status below 200 is
// an invalid mutation and is ignored (Checker::isValidValue).
func TestRetryOnStatusMutatedByUpstreamFilter(t *testing.T) {
	ps := newProcServer(t)
	a := newUpstream(t, nil)
	up := extProcYAML("attempt", `request_header_mode: SKIP, response_header_mode: SEND`)
	e := start(t, cfg{procAddr: ps.addr,
		route:    `retry_policy: {retry_on: "5xx", num_retries: 1, retry_back_off: {base_interval: 0.001s}}`,
		clusters: []string{clusterYAML("a", upstreamFiltersYAML(up), []string{endpointYAML(a.addr(), "")})},
	})
	res := e.do("GET", "/", "", "X-Cluster", "a")
	st1 := ps.next(t, "attempt")
	if h := hdrs(st1.Recv(t)); h[":status"] != "200" {
		t.Fatalf("attempt 1 response headers %v", h)
	}
	st1.Send(t, respHeadersResp(common(setHeaders(":status", "503"))))
	if err := st1.WaitEnd(t); grpcCode(err) != "Canceled" {
		t.Fatalf("attempt 1 stream end %v", err)
	}
	st2 := ps.next(t, "attempt")
	st2.Recv(t)
	st2.Send(t, respHeadersResp(common(setHeaders(":status", "150", "x-second", "1"))))
	r := await(t, res)
	mustOK(t, r, 200)
	if r.resp.Header.Get("X-Second") != "1" {
		t.Fatalf("headers %v", r.resp.Header)
	}
	a.next(t)
	a.next(t)
	if l := e.nextLog(); l.Attempts != 2 {
		t.Fatalf("access log %+v", l)
	}
}

// docs/design.md's attempt role end to end: request headers SEND + body BUFFERED (body
// rewritten per attempt with its content-length), response headers SEND + body
// FULL_DUPLEX_STREAMED: the processor holds the headers, reads the first SSE frame,
// sees an error and answers the headers with a 307; the route role is re-entered with
// the original body.
func TestAttemptRoleHoldsStreamThenRedirects(t *testing.T) {
	ps := newProcServer(t)
	a := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ *recorded) {
		w.Header().Set("content-type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "event: error\ndata: {\"type\":\"overloaded\"}\n\n")
	})
	b := newUpstream(t, nil)
	attempt := extProcYAML("attempt", `request_header_mode: SEND, request_body_mode: BUFFERED, response_header_mode: SEND, response_body_mode: FULL_DUPLEX_STREAMED, response_trailer_mode: SEND`,
		"mutation_rules: {allow_all_routing: true}")
	e := start(t, cfg{
		procAddr: ps.addr,
		filters:  []string{extProcYAML("route", routeRoleMode)},
		route:    `timeout: 0s, internal_redirect_policy: {max_internal_redirects: 3, redirect_response_codes: [307], response_headers_to_copy: [x-state]}`,
		clusters: []string{
			clusterYAML("a", upstreamFiltersYAML(attempt), []string{endpointYAML(a.addr(), "")}),
			clusterYAML("b", "", []string{endpointYAML(b.addr(), "")}),
		},
	})
	host := strings.TrimPrefix(e.url, "http://")
	res := e.do("POST", "/v1/messages", `{"model":"claude","stream":true}`)

	route := func(cluster string) *procStream {
		st := ps.next(t, "route")
		st.Recv(t)
		st.Send(t, reqHeadersResp(nil))
		if m := st.Recv(t); string(m.GetRequestBody().GetBody()) != `{"model":"claude","stream":true}` {
			t.Fatalf("route body %v", m)
		}
		c := common(setHeaders("x-cluster", cluster))
		c.ClearRouteCache = true
		st.Send(t, reqBodyResp(c))
		return st
	}
	route("a")
	at := ps.next(t, "attempt")
	at.Recv(t) // request headers, held (BUFFERED)
	at.Send(t, reqHeadersResp(nil))
	at.Recv(t) // request body
	c := common(setHeaders(":path", "/provider", "content-length", "35"))
	c.BodyMutation = replaceBody(`{"model":"provider-model","stream":1}`[:35])
	at.Send(t, reqBodyResp(c))
	if got := a.next(t); got.Path != "/provider" || len(got.Body) != 35 {
		t.Fatalf("provider got %q %q", got.Path, got.Body)
	}
	if h := hdrs(at.Recv(t)); h[":status"] != "200" {
		t.Fatalf("response headers %v", h)
	}
	if m := at.Recv(t); !strings.Contains(string(m.GetResponseBody().GetBody()), "overloaded") {
		t.Fatalf("first frame %v", m)
	}
	at.Send(t, respHeadersResp(common(setHeaders(":status", "307", "location", "http://"+host+"/v1/messages", "x-state", "overloaded-a"))))
	// If the upstream body was already complete when the headers were answered, Envoy
	// keeps them until the duplex body ends (handleCompleteBodyAvailable does not
	// continue): end it.
	at.Send(t, respBodyResp(streamedBody("", true)))

	r2 := ps.next(t, "route")
	// The re-entry carries the headers as shipped to the provider, content-length of
	// the rewritten body included: the route role restores the client's value.
	if h := hdrs(r2.Recv(t)); h["x-state"] != "overloaded-a" || h[":path"] != "/v1/messages" || h["content-length"] != "35" {
		t.Fatalf("re-entry headers %v", h)
	}
	r2.Send(t, reqHeadersResp(common(setHeaders("content-length", "32"))))
	if m := r2.Recv(t); string(m.GetRequestBody().GetBody()) != `{"model":"claude","stream":true}` {
		t.Fatalf("replayed body %v", m)
	}
	c = common(setHeaders("x-cluster", "b"))
	c.ClearRouteCache = true
	r2.Send(t, reqBodyResp(c))
	mustOK(t, await(t, res), 200)
	if got := b.next(t); got.Body != `{"model":"claude","stream":true}` {
		t.Fatalf("b got %q", got.Body)
	}
}
