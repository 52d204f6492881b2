package sim_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

func respTrailersResp(m *extprocv3.HeaderMutation) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{HeaderMutation: m}}}
}

// countMutation is n removes of headers nobody sent, or n sets of one header: either
// way the map ends with at most one more header, so only the mutation's own count check
// (MutationUtils::responseHeaderSizeCheck) can reject it.
func countMutation(remove bool, n int) *extprocv3.HeaderMutation {
	m := &extprocv3.HeaderMutation{}
	for i := range n {
		if remove {
			m.RemoveHeaders = append(m.RemoveHeaders, fmt.Sprintf("x-absent-%d", i))
			continue
		}
		m.SetHeaders = append(m.SetHeaders, &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: "x-set", RawValue: []byte("v")}})
	}
	return m
}

const h2Cluster = `typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: {"@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, explicit_http_config: {http2_protocol_options: {}}}}`

// trailerUpstream is an HTTP/2 upstream answering "body" and the trailer x-t: 1 once
// release is closed (the response headers go out at once).
func trailerUpstream(t *testing.T, release <-chan struct{}) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-T")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "body")
		w.Header().Set("X-T", "1")
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// A response header mutation with more remove_headers or set_headers entries than the
// map's max_headers_count is rejected whole (responseHeaderSizeCheck), a local reply
// with status_on_error while the headers are still held. Response maps carry the
// upstream codec's limits — the cluster's, 100 — not the HCM's max_headers_count.
func TestResponseHeaderMutationCount(t *testing.T) {
	release := make(chan struct{})
	close(release)
	up := trailerUpstream(t, release)
	for _, c := range []struct {
		name   string
		remove bool
		n      int
		code   int
	}{
		{"100 removes", true, 100, 200}, {"101 removes", true, 101, 500},
		{"100 sets", false, 100, 200}, {"101 sets", false, 101, 500},
	} {
		t.Run(c.name, func(t *testing.T) {
			ps := newProcServer(t)
			e := start(t, cfg{procAddr: ps.addr, hcm: []string{"common_http_protocol_options: {max_headers_count: 10}"},
				filters:  []string{extProcYAML("dn", "request_header_mode: SKIP, response_header_mode: SEND")},
				clusters: []string{clusterYAML("h2", h2Cluster, []string{endpointYAML(up, "")})}})
			ch := e.do("GET", "/", "", "X-Cluster", "h2")
			st := ps.next(t, "dn")
			if m := st.Recv(t); m.GetResponseHeaders() == nil {
				t.Fatalf("want response_headers, got %v", m)
			}
			st.Send(t, respHeadersResp(common(countMutation(c.remove, c.n))))
			r := await(t, ch)
			mustOK(t, r, c.code)
			if c.code == 200 && !c.remove && r.resp.Header.Get("X-Set") != "v" {
				t.Fatalf("the accepted mutation was not applied: %v", r.resp.Header)
			}
		})
	}
}

// The same check on response trailers, which come after the response headers went out:
// a rejected mutation can no longer become a local reply, so the client's stream is
// reset (the HTTP/1 connection closes before the last chunk). An accepted one reaches
// the client's trailers.
func TestResponseTrailerMutationCount(t *testing.T) {
	for _, c := range []struct {
		name   string
		remove bool
		n      int
		reset  bool
	}{
		{"100 removes", true, 100, false}, {"101 removes", true, 101, true},
		{"100 sets", false, 100, false}, {"101 sets", false, 101, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			release := make(chan struct{})
			up := trailerUpstream(t, release)
			ps := newProcServer(t)
			e := start(t, cfg{procAddr: ps.addr,
				filters:  []string{extProcYAML("dn", "request_header_mode: SKIP, response_header_mode: SEND, response_trailer_mode: SEND")},
				clusters: []string{clusterYAML("h2", h2Cluster, []string{endpointYAML(up, "")})}})
			type got struct {
				body    string
				trailer http.Header
				err     error
			}
			headers, done := make(chan *http.Response, 1), make(chan got, 1)
			go func() {
				req, _ := http.NewRequest("GET", e.url+"/", nil)
				req.Header.Set("X-Cluster", "h2")
				resp, err := (&http.Client{Timeout: wait}).Do(req)
				if err != nil {
					done <- got{err: err}
					return
				}
				headers <- resp
				b, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				done <- got{body: string(b), trailer: resp.Trailer, err: err}
			}()
			st := ps.next(t, "dn")
			if m := st.Recv(t); m.GetResponseHeaders() == nil {
				t.Fatalf("want response_headers, got %v", m)
			}
			st.Send(t, respHeadersResp(nil))
			select {
			case resp := <-headers:
				if resp.StatusCode != 200 {
					t.Fatalf("status %d", resp.StatusCode)
				}
			case g := <-done:
				t.Fatalf("no response headers: %v", g.err)
			}
			close(release) // the headers went out; now the body and trailers
			if m := st.Recv(t); m.GetResponseTrailers() == nil {
				t.Fatalf("want response_trailers, got %v", m)
			}
			st.Send(t, respTrailersResp(countMutation(c.remove, c.n)))
			g := <-done
			if c.reset {
				if g.err == nil || !strings.Contains(g.err.Error(), "unexpected EOF") {
					t.Fatalf("client read %q, %v; want the stream reset", g.body, g.err)
				}
				return
			}
			if g.err != nil || g.body != "body" || g.trailer.Get("X-T") != "1" {
				t.Fatalf("client read %q trailers %v, %v", g.body, g.trailer, g.err)
			}
			if !c.remove && g.trailer.Get("X-Set") != "v" {
				t.Fatalf("the accepted trailer mutation was not applied: %v", g.trailer)
			}
		})
	}
}

// Request trailers carry the HCM's limits (the server codec's): with max_headers_count
// 10, a request trailer mutation with 11 sets is rejected (a local reply, the response
// not started yet) and one with 10 goes on to the upstream.
func TestRequestTrailerMutationCountUsesHCMLimit(t *testing.T) {
	type seen struct{ trailer string }
	got := make(chan seen, 4)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		got <- seen{r.Trailer.Get("X-Set")}
		_, _ = io.WriteString(w, "ok")
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		n    int
		code int
	}{{10, 200}, {11, 500}} {
		t.Run(fmt.Sprint(c.n), func(t *testing.T) {
			ps := newProcServer(t)
			e := start(t, cfg{procAddr: ps.addr, hcm: []string{"common_http_protocol_options: {max_headers_count: 10}"},
				filters:  []string{extProcYAML("dn", "request_header_mode: SKIP, request_trailer_mode: SEND, response_header_mode: SKIP")},
				clusters: []string{clusterYAML("h2", h2Cluster, []string{endpointYAML(srv.Listener.Addr().String(), "")})}})
			req, _ := http.NewRequest("POST", e.url+"/t", io.MultiReader(strings.NewReader("abc")))
			req.Header.Set("X-Cluster", "h2")
			req.Trailer = http.Header{"X-Set": {"client"}}
			res := make(chan result, 1)
			go func() {
				resp, err := (&http.Client{Timeout: wait}).Do(req)
				if err != nil {
					res <- result{err: err}
					return
				}
				b, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				res <- result{resp: resp, body: string(b), err: err}
			}()
			st := ps.next(t, "dn")
			if m := st.Recv(t); m.GetRequestTrailers() == nil {
				t.Fatalf("want request_trailers, got %v", m)
			}
			st.Send(t, reqTrailersResp(countMutation(false, c.n)))
			mustOK(t, await(t, res), c.code)
			if c.code == 200 {
				if g := <-got; g.trailer != "v" {
					t.Fatalf("upstream got trailer %q, want the mutated v", g.trailer)
				}
			}
		})
	}
}
