package sim_test

import (
	"bufio"
	"github.com/switchyard-gw/switchyard/internal/testnet"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const previousPriorities = `retry_priority: {name: envoy.retry_priorities.previous_priorities, typed_config: {"@type": type.googleapis.com/envoy.extensions.retry.priority.previous_priorities.v3.PreviousPrioritiesConfig, update_frequency: 1}}`

// No route → 404 NR; unknown cluster → 503 NC (cluster_not_found_response_code).
func TestNoRouteAndNoCluster(t *testing.T) {
	y := strings.Replace(cfg{}.yaml(), `match: {prefix: "/"}`, `match: {prefix: "/v1"}`, 1)
	e := startYAML(t, y)
	r := await(t, e.do("GET", "/other", ""))
	mustOK(t, r, 404)
	if l := e.nextLog(); l.ResponseFlags[0] != "NR" {
		t.Fatalf("flags %v", l.ResponseFlags)
	}
	mustOK(t, await(t, e.do("GET", "/v1", "", "X-Cluster", "missing")), 503)
	if l := e.nextLog(); l.ResponseFlags[0] != "NC" {
		t.Fatalf("flags %v", l.ResponseFlags)
	}
}

// A cluster without hosts → 503 "no healthy upstream" (UH).
func TestNoHealthyUpstream(t *testing.T) {
	e := start(t, cfg{clusters: []string{`{name: empty, type: STATIC, load_assignment: {cluster_name: empty}}`}})
	r := await(t, e.do("GET", "/", "", "X-Cluster", "empty"))
	mustOK(t, r, 503)
	if r.body != "no healthy upstream" {
		t.Fatalf("body %q", r.body)
	}
	if l := e.nextLog(); l.ResponseFlags[0] != "UH" {
		t.Fatalf("flags %v", l.ResponseFlags)
	}
}

// Connection refused without retries → 503 with Envoy's reset body and flag UF.
func TestConnectFailure(t *testing.T) {
	e := start(t, cfg{clusters: []string{clusterYAML("dead", "", []string{endpointYAML(testnet.DeadAddress(t), "")})}})
	r := await(t, e.do("GET", "/", "", "X-Cluster", "dead"))
	mustOK(t, r, 503)
	want := "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure, transport failure reason: delayed connect error: 111"
	if r.body != want {
		t.Fatalf("body %q", r.body)
	}
	if l := e.nextLog(); l.ResponseFlags[0] != "UF" {
		t.Fatalf("flags %v", l.ResponseFlags)
	}
}

// A transport failure on priority 0 is retried on priority 1 with
// previous_priorities (docs/design.md §6 item 15; the trampoline pattern of docs/design.md).
func TestPreviousPrioritiesRetryGoesToPriority1(t *testing.T) {
	p1 := newUpstream(t, nil)
	e := start(t, cfg{
		route:    `retry_policy: {retry_on: "connect-failure,reset,refused-stream", num_retries: 1, ` + previousPriorities + `}`,
		clusters: []string{clusterYAML("dep", "", []string{endpointYAML(testnet.DeadAddress(t), "")}, []string{endpointYAML(p1.addr(), "")})},
	})
	r := await(t, e.do("POST", "/v1/chat", "body", "X-Cluster", "dep"))
	mustOK(t, r, 200)
	got := p1.next(t)
	if got.Body != "body" || got.Header.Get("X-Envoy-Attempt-Count") != "2" {
		t.Fatalf("priority 1 got %q attempt %q", got.Body, got.Header.Get("X-Envoy-Attempt-Count"))
	}
	if l := e.nextLog(); l.Attempts != 2 || l.UpstreamHost != p1.addr() {
		t.Fatalf("access log %+v", l)
	}
}

// Without previous_priorities the retry stays on the healthy priority 0, so it fails
// again (retries never re-route, and the LB keeps choosing P0).
func TestRetryWithoutPreviousPrioritiesStaysOnP0(t *testing.T) {
	p1 := newUpstream(t, nil)
	e := start(t, cfg{
		route:    `retry_policy: {retry_on: "connect-failure", num_retries: 2}`,
		clusters: []string{clusterYAML("dep", "", []string{endpointYAML(testnet.DeadAddress(t), "")}, []string{endpointYAML(p1.addr(), "")})},
	})
	r := await(t, e.do("GET", "/", "", "X-Cluster", "dep"))
	mustOK(t, r, 503)
	if !strings.Contains(r.body, "retried and the latest reset reason: remote connection failure") {
		t.Fatalf("body %q", r.body)
	}
	if l := e.nextLog(); l.Attempts != 3 || !contains(l.ResponseFlags, "URX") {
		t.Fatalf("access log %+v", l)
	}
	p1.none(t)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// retry_on 5xx / retriable-status-codes / retriable-headers with num_retries, using
// the response as it left the upstream; exhausted retries pass the last response.
func TestRetryOnResponses(t *testing.T) {
	var n atomic.Int32
	a := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ *recorded) {
		switch n.Add(1) {
		case 1:
			w.WriteHeader(503)
		case 2:
			w.WriteHeader(429)
		case 3:
			w.Header().Set("x-retry-me", "1")
			w.WriteHeader(200)
		default:
			w.WriteHeader(500)
			_, _ = io.WriteString(w, "last")
		}
	})
	e := start(t, cfg{
		route:    `retry_policy: {retry_on: "5xx,retriable-status-codes,retriable-headers", num_retries: 3, retriable_status_codes: [429], retriable_headers: [{name: x-retry-me}], retry_back_off: {base_interval: 0.001s}}`,
		clusters: []string{clusterYAML("a", "", []string{endpointYAML(a.addr(), "")})},
	})
	r := await(t, e.do("GET", "/", "", "X-Cluster", "a"))
	mustOK(t, r, 500)
	if r.body != "last" {
		t.Fatalf("body %q", r.body)
	}
	for i := 1; i <= 4; i++ {
		if got := a.next(t).Header.Get("X-Envoy-Attempt-Count"); got != strconv.Itoa(i) {
			t.Fatalf("attempt %d header %q", i, got)
		}
	}
	if l := e.nextLog(); l.Attempts != 4 || !contains(l.ResponseFlags, "URX") {
		t.Fatalf("access log %+v", l)
	}
}

// x-envoy-upstream-rq-timeout-ms sets the route timeout for this request and is not
// sent upstream; expiry → 504 "upstream request timeout" (UT).
func TestRequestTimeoutHeader(t *testing.T) {
	release := make(chan struct{})
	a := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ *recorded) { <-release })
	t.Cleanup(func() { close(release) }) // before the server's Close (cleanups run LIFO)
	// An internal request (RFC1918 XFF): the HCM strips these headers from external ones.
	e := start(t, cfg{route: "timeout: 0s", hcm: []string{"internal_address_config: {}"}, clusters: []string{clusterYAML("a", "", []string{endpointYAML(a.addr(), "")})}})
	r := await(t, e.do("GET", "/", "", "X-Cluster", "a", "x-forwarded-for", "10.0.0.1", "x-envoy-upstream-rq-timeout-ms", "300"))
	mustOK(t, r, 504)
	if r.body != "upstream request timeout" {
		t.Fatalf("body %q", r.body)
	}
	got := a.next(t)
	if got.Header.Get("X-Envoy-Upstream-Rq-Timeout-Ms") != "" || got.Header.Get("X-Envoy-Expected-Rq-Timeout-Ms") != "300" {
		t.Fatalf("upstream headers %v", got.Header)
	}
	if l := e.nextLog(); !contains(l.ResponseFlags, "UT") {
		t.Fatalf("flags %v", l.ResponseFlags)
	}
}

// A per-try timeout before the commit is retried (as a local reset, with retry_on
// reset/5xx/gateway-error); after response headers went downstream it is ignored.
func TestPerTryTimeoutBeforeAndAfterCommit(t *testing.T) {
	release := make(chan struct{})
	var n atomic.Int32
	a := newUpstream(t, func(w http.ResponseWriter, r *http.Request, rec *recorded) {
		switch {
		case r.URL.Path == "/slow-first" && n.Add(1) == 1:
			<-release // never answers in time
		case r.URL.Path == "/slow-body":
			w.WriteHeader(200)
			_, _ = io.WriteString(w, "head-")
			w.(http.Flusher).Flush()
			// Much longer than the 200 ms per-try timeout, after the commit.
			time.Sleep(800 * time.Millisecond)
			_, _ = io.WriteString(w, "tail")
		default:
			_, _ = io.WriteString(w, "second")
		}
	})
	t.Cleanup(func() { close(release) })
	e := start(t, cfg{
		route:    `timeout: 0s, retry_policy: {retry_on: "reset", num_retries: 1, retry_back_off: {base_interval: 0.001s}}`,
		clusters: []string{clusterYAML("a", "", []string{endpointYAML(a.addr(), "")})},
		hcm:      []string{"internal_address_config: {}"}, // internal requests keep x-envoy-* headers
	})
	r := await(t, e.do("GET", "/slow-first", "", "X-Cluster", "a", "x-forwarded-for", "10.0.0.1", "x-envoy-upstream-rq-per-try-timeout-ms", "200"))
	mustOK(t, r, 200)
	if r.body != "second" {
		t.Fatalf("body %q", r.body)
	}
	first := a.next(t)
	if first.Header.Get("X-Envoy-Upstream-Rq-Per-Try-Timeout-Ms") != "" || first.Header.Get("X-Envoy-Expected-Rq-Timeout-Ms") != "200" {
		t.Fatalf("first attempt headers %v", first.Header)
	}
	a.next(t)
	if l := e.nextLog(); l.Attempts != 2 || !contains(l.ResponseFlags, "UT") {
		t.Fatalf("access log %+v", l)
	}

	r = await(t, e.do("GET", "/slow-body", "", "X-Cluster", "a", "x-forwarded-for", "10.0.0.1", "x-envoy-upstream-rq-per-try-timeout-ms", "200"))
	mustOK(t, r, 200)
	if r.body != "head-tail" {
		t.Fatalf("body %q", r.body)
	}
	a.next(t)
	if l := e.nextLog(); l.Attempts != 1 {
		t.Fatalf("access log %+v", l)
	}
}

// An upstream reset after the response was committed resets the downstream stream:
// no retry, no in-band error (docs/design.md §6 item 17).
func TestUpstreamResetAfterCommitResetsClient(t *testing.T) {
	readFirst := make(chan struct{})
	a := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ *recorded) {
		w.Header().Set("content-type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-readFirst:
		case <-time.After(wait):
		}
		panic(http.ErrAbortHandler)
	})
	e := start(t, cfg{
		route:    `retry_policy: {retry_on: "reset,5xx", num_retries: 3}`,
		clusters: []string{clusterYAML("a", "", []string{endpointYAML(a.addr(), "")})},
	})
	req, _ := http.NewRequest("GET", e.url+"/", nil)
	req.Header.Set("X-Cluster", "a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: first\n" {
		t.Fatalf("first line %q %v", line, err)
	}
	close(readFirst)
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("client saw a clean end; want a reset")
	}
	l := e.nextLog()
	if !l.DownstreamReset || l.Attempts != 1 || !contains(l.ResponseFlags, "UC") {
		t.Fatalf("access log %+v", l)
	}
	a.next(t)
	a.none(t)
}

// Route timeout default 15 s is applied when not configured; "timeout: 0s" disables
// it (no x-envoy-expected-rq-timeout-ms then).
func TestRouteTimeoutDefaults(t *testing.T) {
	a := newUpstream(t, nil)
	e := start(t, cfg{clusters: []string{clusterYAML("a", "", []string{endpointYAML(a.addr(), "")})}})
	mustOK(t, await(t, e.do("GET", "/", "", "X-Cluster", "a")), 200)
	if got := a.next(t).Header.Get("X-Envoy-Expected-Rq-Timeout-Ms"); got != "15000" {
		t.Fatalf("expected timeout %q", got)
	}
	e2 := start(t, cfg{route: "timeout: 0s", clusters: []string{clusterYAML("a", "", []string{endpointYAML(a.addr(), "")})}})
	mustOK(t, await(t, e2.do("GET", "/", "", "X-Cluster", "a")), 200)
	if got := a.next(t).Header.Get("X-Envoy-Expected-Rq-Timeout-Ms"); got != "" {
		t.Fatalf("expected timeout %q with timeout 0s", got)
	}
}

// HTTP/2 prior knowledge (h2c) downstream works like HTTP/1.1.
func TestH2CDownstream(t *testing.T) {
	a := newUpstream(t, nil)
	e := start(t, cfg{clusters: []string{clusterYAML("a", "", []string{endpointYAML(a.addr(), "")})}})
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	c := &http.Client{Transport: &http.Transport{Protocols: p}, Timeout: wait}
	req, _ := http.NewRequest("POST", e.url+"/h2", strings.NewReader("hi"))
	req.Header.Set("X-Cluster", "a")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || !strings.HasPrefix(string(b), "ok from") {
		t.Fatalf("proto %d status %d body %q", resp.ProtoMajor, resp.StatusCode, b)
	}
	if got := a.next(t); got.Body != "hi" || got.Path != "/h2" {
		t.Fatalf("upstream got %+v", got)
	}
}

// explicit_http_config http2_protocol_options speaks HTTP/2 with prior knowledge to a
// plaintext upstream (h2c).
func TestH2CUpstream(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r.Proto + " " + string(b)
		_, _ = io.WriteString(w, "h2 ok")
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	h2 := `typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: {"@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, explicit_http_config: {http2_protocol_options: {}}}}`
	e := start(t, cfg{clusters: []string{clusterYAML("h2", h2, []string{endpointYAML(srv.Listener.Addr().String(), "")})}})
	r := await(t, e.do("POST", "/", "body", "X-Cluster", "h2"))
	mustOK(t, r, 200)
	if r.body != "h2 ok" {
		t.Fatalf("body %q", r.body)
	}
	if g := <-got; g != "HTTP/2.0 body" {
		t.Fatalf("upstream saw %q", g)
	}
}

// x-envoy-hedge-on-per-try-timeout is always removed (FilterUtility::
// finalHedgingParams). envoysim implements no hedging, so "true" with a per-try
// timeout, where Envoy would keep the timed-out attempt running
// (Filter::onSoftPerTryTimeout), is refused loudly instead of retried differently.
func TestHedgeOnPerTryTimeoutHeader(t *testing.T) {
	a, ca := oneCluster(t)
	e := start(t, cfg{hcm: []string{"internal_address_config: {}"}, clusters: []string{ca}}) // internal requests keep x-envoy-* headers
	r := await(t, e.do("GET", "/", "", "X-Cluster", "a", "x-forwarded-for", "10.0.0.1", "x-envoy-hedge-on-per-try-timeout", "true", "x-envoy-upstream-rq-per-try-timeout-ms", "300"))
	mustOK(t, r, 500)
	if l := e.nextLog(); l.ResponseCodeDetails != "envoysim_hedging_not_supported" {
		t.Fatalf("access log %+v", l)
	}
	a.none(t)
	for _, h := range [][]string{
		{"x-envoy-hedge-on-per-try-timeout", "true"},
		{"x-envoy-hedge-on-per-try-timeout", "false", "x-envoy-upstream-rq-per-try-timeout-ms", "300"},
	} {
		mustOK(t, await(t, e.do("GET", "/", "", append([]string{"X-Cluster", "a"}, h...)...)), 200)
		if got := a.next(t).Header.Get("X-Envoy-Hedge-On-Per-Try-Timeout"); got != "" {
			t.Fatalf("header sent upstream: %q", got)
		}
	}
}
