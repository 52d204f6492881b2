package sim_test

import (
	"net/http"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim"
)

// Route.response_headers_to_remove: removed from an upstream response by full name
// (HeaderParser::evaluateHeaders); a local reply of a stream with a route is finalized too,
// before its own headers are added, so an ImmediateResponse keeps what it sets
// (DownstreamFilterManager::sendLocalReplyViaFilterChain).
func TestRouteResponseHeadersToRemove(t *testing.T) {
	a := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ *recorded) {
		w.Header().Set("openai-organization", "org-1")
		w.Header().Set("x-ratelimit-reset-requests", "6ms")
		w.Header().Set("x-ratelimit-limit-requests", "100") // not listed: stays
		w.Header().Set("content-type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	})
	ca := clusterYAML("a", "", []string{endpointYAML(a.addr(), "")})
	remove := `response_headers_to_remove: [openai-organization, X-Ratelimit-Reset-Requests, x-from-reply]`
	e := start(t, cfg{clusters: []string{ca}, routeFields: remove})
	r := await(t, e.do("GET", "/", "", "X-Cluster", "a"))
	mustOK(t, r, 200)
	if r.resp.Header.Get("openai-organization") != "" || r.resp.Header.Get("x-ratelimit-reset-requests") != "" {
		t.Fatalf("listed headers passed: %v", r.resp.Header)
	}
	if r.resp.Header.Get("x-ratelimit-limit-requests") != "100" || r.resp.Header.Get("content-type") != "application/json" {
		t.Fatalf("unlisted headers went: %v", r.resp.Header)
	}

	ps := newProcServer(t)
	e = start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, response_header_mode: SKIP")}, clusters: []string{ca}, routeFields: remove})
	res := e.do("GET", "/", "", "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	st.Send(t, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
		Status:  &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable},
		Headers: setHeaders("x-from-reply", "kept", "content-type", "application/json"),
		Body:    []byte(`{"error":"x"}`),
	}}})
	r = await(t, res)
	mustOK(t, r, 503)
	if r.resp.Header.Get("x-from-reply") != "kept" {
		t.Fatalf("an ImmediateResponse header on the route's list was removed: %v", r.resp.Header)
	}
}

func TestRouteResponseHeadersToRemoveRejectsPseudoAndHost(t *testing.T) {
	for _, name := range []string{":status", "host"} {
		y := cfg{routeFields: `response_headers_to_remove: ["` + name + `"]`}.yaml()
		bs, err := sim.Load([]byte(y))
		if err == nil {
			_, err = sim.New(bs)
		}
		if err == nil || !strings.Contains(err.Error(), "may not be removed") {
			t.Fatalf("%s: err %v", name, err)
		}
	}
}
