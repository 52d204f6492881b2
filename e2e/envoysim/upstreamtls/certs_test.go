package upstreamtls

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// testCA is a throwaway certificate authority.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	return key
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("create CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse CA: %v", err)
	}
	return &testCA{cert: cert, key: key, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// leaf is an issued certificate in both forms the tests need.
type leaf struct {
	tls      tls.Certificate
	certPEM  string
	keyPEM   string
	template *x509.Certificate
}

func (ca *testCA) issue(t *testing.T, tmpl *x509.Certificate) leaf {
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("issue: %v", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("marshal key: %v", err)
	}
	l := leaf{
		certPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		keyPEM:   string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})),
		template: tmpl,
	}
	l.tls, err = tls.X509KeyPair([]byte(l.certPEM), []byte(l.keyPEM))
	if err != nil {
		t.Fatalf("key pair: %v", err)
	}
	return l
}

// serverLeaf is the upstream's certificate: the names a provider endpoint might have.
func serverLeaf(t *testing.T, ca *testCA) leaf {
	t.Helper()
	spiffe, _ := url.Parse("spiffe://example.test/provider")
	return ca.issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "api.example.test"},
		DNSNames:    []string{"api.example.test", "*.wild.example.test"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		URIs:        []*url.URL{spiffe},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// tlsServer is an HTTPS upstream that records the SNI of every ClientHello.
type tlsServer struct {
	*httptest.Server
	mu   sync.Mutex
	snis []string
}

func startTLSServer(t *testing.T, cert tls.Certificate, clientCAs *x509.CertPool) *tlsServer {
	t.Helper()
	s := &tlsServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // failed handshakes are expected
	s.TLS = &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			s.mu.Lock()
			s.snis = append(s.snis, hello.ServerName)
			s.mu.Unlock()
			return nil, nil
		},
	}
	if clientCAs != nil {
		s.TLS.ClientCAs = clientCAs
		s.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *tlsServer) lastSNI(t *testing.T) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.snis) == 0 {
		t.Fatal("server saw no ClientHello")
	}
	return s.snis[len(s.snis)-1]
}

func (s *tlsServer) addr() string { return s.Listener.Addr().String() }

// handshake dials addr and completes a TLS handshake the way envoysim should: with
// tls.Client, so an empty ServerName stays empty.
func handshake(t *testing.T, addr string, cfg *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	tc := tls.Client(conn, cfg)
	defer tc.Close()
	if err := tc.HandshakeContext(ctx); err != nil {
		return tls.ConnectionState{}, err
	}
	return tc.ConnectionState(), nil
}

func tlsSocket(t *testing.T, u *tlsv3.UpstreamTlsContext) *corev3.TransportSocket {
	t.Helper()
	a, err := anypb.New(u)
	if err != nil {
		t.Fatalf("anypb: %v", err)
	}
	return &corev3.TransportSocket{Name: tlsSocketName, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}
}

func inlineString(s string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: s}}
}

// withCA returns a CommonTlsContext trusting caPEM.
func withCA(caPEM string) *tlsv3.CommonTlsContext {
	return &tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
		ValidationContext: &tlsv3.CertificateValidationContext{TrustedCa: inlineString(caPEM)},
	}}
}

func mustConfig(t *testing.T, ts *corev3.TransportSocket) *tls.Config {
	t.Helper()
	cfg, err := ClientConfig(ts)
	if err != nil {
		t.Fatalf("ClientConfig: %v", err)
	}
	if cfg == nil {
		t.Fatal("ClientConfig returned nil config for a TLS socket")
	}
	return cfg
}
