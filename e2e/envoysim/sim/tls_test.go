package sim_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testCA issues a server certificate for names, returning the CA PEM and the leaf.
func testCA(t *testing.T, names ...string) (string, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "envoysim test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	return caPEM, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// One cluster mixes a TLS endpoint (selected by transport_socket_matches on the
// endpoint's envoy.transport_socket_match metadata, SNI from the UpstreamTlsContext,
// server verified against trusted_ca) and a plaintext endpoint.
func TestUpstreamTLSAndTransportSocketMatches(t *testing.T) {
	caPEM, cert := testCA(t, "api.test")
	sni := make(chan string, 4)
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls %v", r.TLS != nil)
	}))
	tlsSrv.TLS = &tls.Config{
		Certificates: []tls.Certificate{cert},
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni <- h.ServerName
			return nil, nil
		},
	}
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0)
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	plain := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ *recorded) { _, _ = w.Write([]byte("plain")) })

	tlsCtx := func(ca string) string {
		return `{name: envoy.transport_sockets.tls, typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext, sni: api.test, common_tls_context: {validation_context: {trusted_ca: {inline_string: ` + strconv.Quote(ca) + `}}}}}`
	}
	matches := func(ca string) string {
		return `transport_socket_matches: [{name: tls, match: {tls: "true"}, transport_socket: ` + tlsCtx(ca) + `}]`
	}
	tlsEP := endpointYAML(tlsSrv.Listener.Addr().String(), `metadata: {filter_metadata: {envoy.transport_socket_match: {tls: "true"}}}`)
	otherCA, _ := testCA(t, "other.test")
	e := start(t, cfg{clusters: []string{
		clusterYAML("mixed", matches(caPEM), []string{tlsEP, endpointYAML(plain.addr(), "")}),
		clusterYAML("badca", matches(otherCA), []string{tlsEP}),
	}})
	// Equal weights: round robin visits both endpoints in two requests.
	bodies := map[string]bool{}
	for i := 0; i < 2; i++ {
		r := await(t, e.do("GET", "/", "", "X-Cluster", "mixed"))
		mustOK(t, r, 200)
		bodies[r.body] = true
	}
	if !bodies["tls true"] || !bodies["plain"] {
		t.Fatalf("bodies %v, want one TLS and one plaintext answer", bodies)
	}
	if got := <-sni; got != "api.test" {
		t.Fatalf("SNI %q", got)
	}
	// A server certificate outside trusted_ca fails the connection (UF).
	r := await(t, e.do("GET", "/", "", "X-Cluster", "badca"))
	mustOK(t, r, 503)
	if !strings.Contains(r.body, "reset reason: remote connection failure, transport failure reason: TLS_error") {
		t.Fatalf("body %q", r.body)
	}
}
