package sim_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func codecEnv(t *testing.T, hcm ...string) (*env, *upstream) {
	t.Helper()
	u := newUpstream(t, nil)
	return start(t, cfg{hcm: hcm, clusters: []string{clusterYAML("a", "", []string{endpointYAML(u.addr(), "")})}}), u
}

// h2c sends one request over HTTP/2 with prior knowledge.
func h2c(t *testing.T, e *env, header ...string) (*http.Response, error) {
	t.Helper()
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	c := &http.Client{Timeout: wait, Transport: &http.Transport{Protocols: p}}
	req, _ := http.NewRequest("GET", e.url+"/", nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
	}
	return resp, err
}

// common_http_protocol_options.max_headers_count: HTTP/1 → 431, HTTP/2 → stream reset.
func TestMaxHeadersCount(t *testing.T) {
	e, u := codecEnv(t, "common_http_protocol_options: {max_headers_count: 5}")
	many := []string{"X-Cluster", "a"}
	for i := range 6 {
		many = append(many, fmt.Sprintf("x-h%d", i), "v")
	}
	r := await(t, e.do("GET", "/", "", many...))
	mustOK(t, r, 431)
	if r.body != "Request Header Fields Too Large" {
		t.Fatalf("body %q", r.body)
	}
	if l := e.nextLog(); l.ResponseCodeDetails != "http1.too_many_headers" {
		t.Fatalf("access log %+v", l)
	}
	u.none(t)
	if _, err := h2c(t, e, many...); err == nil {
		t.Fatal("HTTP/2 request with too many headers was not reset")
	}
	// host + x-cluster + user-agent + accept-encoding: 4 ≤ 5.
	mustOK(t, await(t, e.do("GET", "/", "", "X-Cluster", "a")), 200)
}

// max_request_headers_kb (default 60 KiB, not Go's 1 MiB).
func TestMaxRequestHeadersKB(t *testing.T) {
	e, _ := codecEnv(t)
	r := await(t, e.do("GET", "/", "", "X-Cluster", "a", "x-big", strings.Repeat("a", 61*1024)))
	mustOK(t, r, 431)
	mustOK(t, await(t, e.do("GET", "/", "", "X-Cluster", "a", "x-big", strings.Repeat("a", 50*1024))), 200)

	e2, _ := codecEnv(t, "max_request_headers_kb: 1")
	mustOK(t, await(t, e2.do("GET", "/", "", "X-Cluster", "a", "x-big", strings.Repeat("a", 1100))), 431)
	if l := e2.nextLog(); l.ResponseCodeDetails != "http1.headers_too_large" {
		t.Fatalf("access log %+v", l)
	}
}

// headers_with_underscores_action: ALLOW (default) forwards, DROP_HEADER drops,
// REJECT_REQUEST answers 400 on HTTP/1.
func TestHeadersWithUnderscores(t *testing.T) {
	e, u := codecEnv(t)
	mustOK(t, await(t, e.do("GET", "/", "", "X-Cluster", "a", "x_under", "1")), 200)
	if got := u.next(t); got.Header.Get("x_under") != "1" {
		t.Fatalf("ALLOW: upstream headers %v", got.Header)
	}
	e, u = codecEnv(t, "common_http_protocol_options: {headers_with_underscores_action: DROP_HEADER}")
	mustOK(t, await(t, e.do("GET", "/", "", "X-Cluster", "a", "x_under", "1")), 200)
	if got := u.next(t); got.Header.Get("x_under") != "" {
		t.Fatalf("DROP_HEADER: upstream headers %v", got.Header)
	}
	e, u = codecEnv(t, "common_http_protocol_options: {headers_with_underscores_action: REJECT_REQUEST}")
	r := await(t, e.do("GET", "/", "", "X-Cluster", "a", "x_under", "1"))
	mustOK(t, r, 400)
	if r.body != "Bad Request" {
		t.Fatalf("body %q", r.body)
	}
	u.none(t)
}

// common_http_protocol_options.idle_timeout closes a connection without requests.
func TestConnectionIdleTimeout(t *testing.T) {
	e, _ := codecEnv(t, "common_http_protocol_options: {idle_timeout: 0.2s}")
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nX-Cluster: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("connection not closed by the idle timeout: %v", err)
	}
}

// ext_proc checks header mutations against the request map's limits, which are the
// HCM's (MutationUtils::headerMutationResultCheck): 120 added headers fail with the
// default 100 and pass with max_headers_count: 200.
func TestExtProcMutationUsesHCMHeaderLimits(t *testing.T) {
	kv := []string{}
	for i := range 120 {
		kv = append(kv, fmt.Sprintf("x-m%d", i), "v")
	}
	for _, c := range []struct {
		hcm  []string
		code int
	}{{nil, 500}, {[]string{"common_http_protocol_options: {max_headers_count: 200}"}, 200}} {
		ps := newProcServer(t)
		u := newUpstream(t, nil)
		e := start(t, cfg{procAddr: ps.addr, hcm: c.hcm, filters: []string{extProcYAML("route", "request_header_mode: SEND, response_header_mode: SKIP")},
			clusters: []string{clusterYAML("a", "", []string{endpointYAML(u.addr(), "")})}})
		ch := e.do("GET", "/", "", "X-Cluster", "a")
		s := ps.next(t, "route")
		s.Recv(t)
		s.Send(t, reqHeadersResp(common(setHeaders(kv...))))
		mustOK(t, await(t, ch), c.code)
	}
}
