package sim_test

import (
	"crypto/tls"
	"github.com/switchyard-gw/switchyard/internal/testnet"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// firstOrEnd returns the first message of st, or nil if the stream ended first.
// Envoy (and envoysim) sends request_headers and then resets the stream; a gRPC
// server that reads late may see only the reset.
func firstOrEnd(t *testing.T, st *procStream) *extprocv3.ProcessingRequest {
	t.Helper()
	select {
	case m := <-st.recv:
		return m
	case err := <-st.ended:
		select {
		case m := <-st.recv:
			st.ended <- err
			return m
		default:
		}
		st.ended <- err
		return nil
	case <-time.After(wait):
		t.Fatal("ext_proc stream neither sent a message nor ended")
		return nil
	}
}

// hangingListener accepts connections and never answers: a TLS handshake to it
// lasts until connect_timeout.
func hangingListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// tlsServer is an HTTPS upstream with cert.
func tlsServer(t *testing.T, cert tls.Certificate) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "tls") }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func tlsSocketYAML(ca string) string {
	return `transport_socket: {name: envoy.transport_sockets.tls, typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext, sni: api.test, common_tls_context: {validation_context: {trusted_ca: {inline_string: ` + strconv.Quote(ca) + `}}}}}`
}

// UpstreamRequest::acceptHeadersFromRouter asks the pool for a connection and runs
// the upstream filters on the request headers in the same call; the pool failure
// (onPoolFailure → onResetStream) comes later. So every attempt whose connect is
// refused or whose TLS handshake fails opens its upstream ext_proc stream (with
// request_headers) before it is reset, and the stream is then cancelled.
func TestUpstreamFiltersRunOnFastConnectFailure(t *testing.T) {
	_, cert := testCA(t, "api.test")
	otherCA, _ := testCA(t, "other.test")
	tlsAddr := tlsServer(t, cert)
	cases := []struct {
		name, addr, extra, body string
	}{
		{"connect refused", testnet.DeadAddress(t), "", "reset reason: remote connection failure, transport failure reason: delayed connect error: 111"},
		{"TLS failure", tlsAddr, tlsSocketYAML(otherCA), "reset reason: remote connection failure, transport failure reason: TLS_error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps := newProcServer(t)
			up := extProcYAML("attempt", "request_header_mode: SEND, response_header_mode: SKIP")
			extra := upstreamFiltersYAML(up)
			if c.extra != "" {
				extra += ", " + c.extra
			}
			e := start(t, cfg{procAddr: ps.addr,
				route:    `retry_policy: {retry_on: "connect-failure", num_retries: 3, retry_back_off: {base_interval: 0.001s}}`,
				clusters: []string{clusterYAML("dead", extra, []string{endpointYAML(c.addr, "")})},
			})
			r := await(t, e.do("GET", "/", "", "X-Cluster", "dead"))
			mustOK(t, r, 503)
			if !strings.Contains(r.body, c.body) {
				t.Fatalf("body %q", r.body)
			}
			for i := 1; i <= 4; i++ {
				st := ps.next(t, "attempt")
				if m := firstOrEnd(t, st); m != nil && m.GetRequestHeaders() == nil {
					t.Fatalf("attempt stream %d: first message %v", i, m)
				}
				if err := st.DrainUntilEnd(t); grpcCode(err) != "Canceled" {
					t.Fatalf("attempt stream %d end %v", i, err)
				}
			}
			ps.none(t, "attempt")
			if l := e.nextLog(); l.Attempts != 4 || !contains(l.ResponseFlags, "UF") {
				t.Fatalf("access log %+v", l)
			}
		})
	}
}

// A connect that times out (here a TLS handshake that never completes within
// connect_timeout) leaves the upstream filters running meanwhile: the processor gets
// request_headers, and after answering them the buffered body, before the attempt
// is reset with "connection timeout" and its stream cancelled.
func TestUpstreamFiltersRunDuringConnectTimeout(t *testing.T) {
	caPEM, _ := testCA(t, "api.test")
	ps := newProcServer(t)
	up := extProcYAML("attempt", "request_header_mode: SEND, request_body_mode: BUFFERED, response_header_mode: SKIP", "message_timeout: 5s")
	cl := strings.Replace(clusterYAML("slow", upstreamFiltersYAML(up)+", "+tlsSocketYAML(caPEM), []string{endpointYAML(hangingListener(t), "")}),
		"connect_timeout: 2s", "connect_timeout: 0.4s", 1)
	e := start(t, cfg{procAddr: ps.addr, clusters: []string{cl}})
	res := e.do("POST", "/", "payload", "X-Cluster", "slow")
	st := ps.next(t, "attempt")
	if h := hdrs(st.Recv(t)); h[":method"] != "POST" {
		t.Fatalf("request headers %v", h)
	}
	st.Send(t, reqHeadersResp(nil))
	if b := st.Recv(t).GetRequestBody(); string(b.GetBody()) != "payload" || !b.GetEndOfStream() {
		t.Fatalf("request body %v", b)
	}
	pending(t, res)
	r := await(t, res)
	mustOK(t, r, 503)
	if r.body != "upstream connect error or disconnect/reset before headers. reset reason: connection timeout" {
		t.Fatalf("body %q", r.body)
	}
	if err := st.WaitEnd(t); grpcCode(err) != "Canceled" {
		t.Fatalf("stream end %v", err)
	}
}
