package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/internal/redistest"
)

// pki writes a CA, a server certificate for the name "redis.test" only (no IP address, so
// the client must be told the name) and a client certificate, as PEM files in dir.
type pki struct{ ca, serverCert, serverKey, clientCert, clientKey string }

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		b, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, usage x509.ExtKeyUsage, dns []string) ([]byte, *ecdsa.PrivateKey) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), DNSNames: dns,
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	srvDER, srvKey := leaf(2, x509.ExtKeyUsageServerAuth, []string{"redis.test"})
	cliDER, cliKey := leaf(3, x509.ExtKeyUsageClientAuth, nil)
	return pki{
		ca:         write("ca.pem", "CERTIFICATE", caDER),
		serverCert: write("server.pem", "CERTIFICATE", srvDER),
		serverKey:  write("server-key.pem", "PRIVATE KEY", keyDER(srvKey)),
		clientCert: write("client.pem", "CERTIFICATE", cliDER),
		clientKey:  write("client-key.pem", "PRIVATE KEY", keyDER(cliKey)),
	}
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestRedisOverMutualTLS runs switchyard against a redis-server that accepts only TLS
// clients with a certificate of its CA: with -redis-tls-ca, -redis-tls-cert/-key and
// -redis-tls-server-name it seeds and routes on Redis; without the client certificate the
// handshake fails and the replica starts on its file.
func TestRedisOverMutualTLS(t *testing.T) {
	p := newPKI(t)
	tlsPort := freeTCPPort(t)
	redistest.StartWith(t, "--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", p.serverCert,
		"--tls-key-file", p.serverKey, "--tls-ca-cert-file", p.ca, "--tls-auth-clients", "yes")
	addr := "127.0.0.1:" + strconv.Itoa(tlsPort)
	prefix := redistest.Prefix(t)
	common := []string{"-store", "redis", "-redis-addrs", addr, "-redis-prefix", prefix,
		"-redis-tls-ca", p.ca, "-redis-tls-server-name", "redis.test"}

	in := start(t, append([]string{"-config", writeConfig(t, "t1"), "-redis-tls-cert", p.clientCert, "-redis-tls-key", p.clientKey}, common...)...)
	if v := in.live.Load().Version; v < 1 {
		t.Fatalf("version %d in force over TLS, want the seeded one:\n%s", v, in.logs)
	}
	assertKeys(t, in, "t1")
	if strings.Contains(in.logs.String(), "redis unreachable") {
		t.Fatalf("degraded over TLS:\n%s", in.logs)
	}

	anon := start(t, append([]string{"-config", writeConfig(t, "t2")}, common...)...)
	if v := anon.live.Load().Version; v != 0 || !strings.Contains(anon.logs.String(), "starting on the configuration file") {
		t.Fatalf("without a client certificate: version %d, want the file (the server requires one)", v)
	}
}
