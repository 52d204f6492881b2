package sim_test

import (
	"strings"
	"testing"
)

// Route.direct_response (a health route): the router answers with the inline body
// after the decoder filters ran; nothing goes upstream.
func TestDirectResponse(t *testing.T) {
	ps := newProcServer(t)
	u := newUpstream(t, nil)
	y := cfg{procAddr: ps.addr, filters: []string{extProcYAML("route", "request_header_mode: SEND, response_header_mode: SKIP")},
		clusters: []string{clusterYAML("a", "", []string{endpointYAML(u.addr(), "")})}}.yaml()
	const r0 = `routes: [{name: r0`
	if !strings.Contains(y, r0) {
		t.Fatal("test bug: no route r0")
	}
	y = strings.Replace(y, r0, `routes: [{name: health, match: {path: "/healthz"}, direct_response: {status: 200, body: {inline_string: "healthy"}}}, {name: r0`, 1)
	e := startYAML(t, y)
	ch := e.do("GET", "/healthz", "")
	s := ps.next(t, "route")
	if got := hdrs(s.Recv(t))[":path"]; got != "/healthz" {
		t.Fatalf("ext_proc saw :path %q", got)
	}
	s.Send(t, reqHeadersResp(nil))
	r := await(t, ch)
	mustOK(t, r, 200)
	if r.body != "healthy" || r.resp.Header.Get("content-type") != "text/plain" {
		t.Fatalf("body %q headers %v", r.body, r.resp.Header)
	}
	if l := e.nextLog(); l.ResponseCodeDetails != "direct_response" {
		t.Fatalf("access log %+v", l)
	}
	u.none(t)
}
