package sim_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

func reqTrailersResp(m *extprocv3.HeaderMutation) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{HeaderMutation: m}}}
}

// answerResponseHeaders lets the response headers through.
func answerResponseHeaders(t *testing.T, st *procStream) {
	t.Helper()
	if m := st.Recv(t); m.GetResponseHeaders() == nil {
		t.Fatalf("want response_headers, got %v", m)
	}
	st.Send(t, respHeadersResp(nil))
}

// duplexTrailers processes the request FULL_DUPLEX_STREAMED and the response headers,
// so the gRPC stream stays open after the request body's last response.
const duplexTrailers = "request_header_mode: SEND, request_body_mode: FULL_DUPLEX_STREAMED, request_trailer_mode: SEND, response_header_mode: SEND"

// Request trailers from an HTTP/2 client go through the downstream filters (an
// ext_proc with request_trailer_mode SEND gets request_trailers and may mutate them,
// also in FULL_DUPLEX_STREAMED) and on to an HTTP/2 upstream (router.cc
// decodeTrailers, UpstreamRequest::acceptTrailersFromRouter). A FULL_DUPLEX_STREAMED
// processor that ends the body with end_of_stream still leaves the trailers to end the
// stream (FilterManager::decodeData: a filter's end_stream is end_stream && no trailers),
// whether it answers them with a mutation or without one. (With nothing left to process
// on the response, Envoy closes the gRPC stream on that last body response
// (closeGrpcStreamIfLastRespReceived) and the trailers stay held: the request never
// ends; a processor must end a body followed by trailers with end_of_stream false.)
func TestRequestTrailersFromH2Client(t *testing.T) {
	type seen struct{ body, trailer string }
	got := make(chan seen, 4)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{string(b), r.Trailer.Get("X-Checksum")}
		_, _ = io.WriteString(w, "ok")
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	h2 := `typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: {"@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, explicit_http_config: {http2_protocol_options: {}}}}`

	cases := []struct {
		name, mode string
		script     func(t *testing.T, st *procStream)
		wantBody   string
		// wantTrailer is what the upstream reads of x-checksum (the client sent 42).
		wantTrailer string
	}{
		{"body NONE", "request_header_mode: SEND, request_trailer_mode: SEND, response_header_mode: SKIP",
			func(t *testing.T, st *procStream) {
				st.Send(t, reqHeadersResp(nil))
				m := st.Recv(t)
				if m.GetRequestTrailers() == nil || hdrs(m)["x-checksum"] != "42" {
					t.Fatalf("want request_trailers with x-checksum, got %v", m)
				}
				st.Send(t, reqTrailersResp(setHeaders("x-checksum", "43")))
			}, "abc", "43"},
		{"FULL_DUPLEX_STREAMED", "request_header_mode: SEND, request_body_mode: FULL_DUPLEX_STREAMED, request_trailer_mode: SEND, response_header_mode: SKIP",
			func(t *testing.T, st *procStream) {
				if b := st.Recv(t).GetRequestBody(); string(b.GetBody()) != "abc" || b.GetEndOfStream() {
					t.Fatalf("request body %v", b)
				}
				m := st.Recv(t)
				if m.GetRequestTrailers() == nil || hdrs(m)["x-checksum"] != "42" {
					t.Fatalf("want request_trailers with x-checksum, got %v", m)
				}
				st.Send(t, reqHeadersResp(nil))
				st.Send(t, reqBodyResp(streamedBody("ABC", false)))
				st.Send(t, reqTrailersResp(setHeaders("x-checksum", "43")))
			}, "ABC", "43"},
		{"FULL_DUPLEX_STREAMED body ended by the processor, trailers unmutated", duplexTrailers,
			func(t *testing.T, st *procStream) {
				st.Send(t, reqHeadersResp(nil))
				st.Recv(t) // the body
				st.Recv(t) // the trailers
				st.Send(t, reqBodyResp(streamedBody("abc", true)))
				st.Send(t, reqTrailersResp(nil))
				answerResponseHeaders(t, st)
			}, "abc", "42"},
		{"FULL_DUPLEX_STREAMED body ended by the processor, trailers mutated", duplexTrailers,
			func(t *testing.T, st *procStream) {
				st.Send(t, reqHeadersResp(nil))
				st.Recv(t)
				st.Recv(t)
				st.Send(t, reqBodyResp(streamedBody("abc", true)))
				st.Send(t, reqTrailersResp(setHeaders("x-checksum", "43")))
				answerResponseHeaders(t, st)
			}, "abc", "43"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps := newProcServer(t)
			e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("dn", c.mode)},
				clusters: []string{clusterYAML("h2", h2, []string{endpointYAML(srv.Listener.Addr().String(), "")})}})
			p := new(http.Protocols)
			p.SetUnencryptedHTTP2(true)
			client := &http.Client{Transport: &http.Transport{Protocols: p}, Timeout: wait}
			req, _ := http.NewRequest("POST", e.url+"/t", strings.NewReader("abc"))
			req.Header.Set("X-Cluster", "h2")
			req.Trailer = http.Header{"X-Checksum": {"42"}}
			res := make(chan result, 1)
			go func() {
				resp, err := client.Do(req)
				if err != nil {
					res <- result{err: err}
					return
				}
				b, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				res <- result{resp: resp, body: string(b), err: err}
			}()
			st := ps.next(t, "dn")
			if h := hdrs(st.Recv(t)); h["trailer"] != "x-checksum" {
				t.Fatalf("request headers %v", h)
			}
			c.script(t, st)
			mustOK(t, await(t, res), 200)
			if g := <-got; g.body != c.wantBody || g.trailer != c.wantTrailer {
				t.Fatalf("upstream got %+v", g)
			}
		})
	}
}
