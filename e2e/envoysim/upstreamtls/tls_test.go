package upstreamtls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rawbufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestSNIAndTrustedCA proves the basic upstream TLS setup switchyard publishes: sni
// is sent and seen by the server, and trusted_ca from every DataSource form verifies
// the chain; the config also carries a real HTTPS request.
func TestSNIAndTrustedCA(t *testing.T) {
	ca := newCA(t, "test CA")
	srv := startTLSServer(t, serverLeaf(t, ca).tls, nil)

	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, []byte(ca.pem), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ENVOYSIM_TEST_CA", ca.pem)
	sources := map[string]*corev3.DataSource{
		"inline_string":        inlineString(ca.pem),
		"inline_bytes":         {Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte(ca.pem)}},
		"filename":             {Specifier: &corev3.DataSource_Filename{Filename: caFile}},
		"environment_variable": {Specifier: &corev3.DataSource_EnvironmentVariable{EnvironmentVariable: "ENVOYSIM_TEST_CA"}},
	}
	for name, ds := range sources {
		t.Run(name, func(t *testing.T) {
			cfg := mustConfig(t, tlsSocket(t, &tlsv3.UpstreamTlsContext{
				Sni: "api.example.test",
				CommonTlsContext: &tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
					ValidationContext: &tlsv3.CertificateValidationContext{TrustedCa: ds},
				}},
			}))
			if cfg.ServerName != "api.example.test" || cfg.RootCAs == nil {
				t.Errorf("ServerName=%q RootCAs=%v", cfg.ServerName, cfg.RootCAs)
			}
			if _, err := handshake(t, srv.addr(), cfg); err != nil {
				t.Fatalf("handshake: %v", err)
			}
			if got := srv.lastSNI(t); got != "api.example.test" {
				t.Errorf("server saw SNI %q, want api.example.test", got)
			}
		})
	}

	// The config works for HTTP when dialled with tls.Client.
	cfg := mustConfig(t, tlsSocket(t, &tlsv3.UpstreamTlsContext{Sni: "api.example.test", CommonTlsContext: withCA(ca.pem)}))
	client := &http.Client{Transport: &http.Transport{
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			tc := tls.Client(conn, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				conn.Close()
				return nil, err
			}
			return tc, nil
		},
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Errorf("GET = %d %q", resp.StatusCode, body)
	}
}

// TestWrongCAFails proves a chain that does not lead to trusted_ca is refused.
func TestWrongCAFails(t *testing.T) {
	srv := startTLSServer(t, serverLeaf(t, newCA(t, "real CA")).tls, nil)
	other := newCA(t, "other CA")
	cfg := mustConfig(t, tlsSocket(t, &tlsv3.UpstreamTlsContext{Sni: "api.example.test", CommonTlsContext: withCA(other.pem)}))
	_, err := handshake(t, srv.addr(), cfg)
	if err == nil || !strings.Contains(err.Error(), "verify cert failed") {
		t.Fatalf("handshake error = %v, want a verification failure", err)
	}
}

// TestNoValidationContextDoesNotVerify proves Envoy's default: without a validation
// context any server certificate is accepted, and without sni no SNI is sent.
func TestNoValidationContextDoesNotVerify(t *testing.T) {
	srv := startTLSServer(t, serverLeaf(t, newCA(t, "unknown CA")).tls, nil)

	cfg := mustConfig(t, tlsSocket(t, &tlsv3.UpstreamTlsContext{Sni: "api.example.test"}))
	if _, err := handshake(t, srv.addr(), cfg); err != nil {
		t.Fatalf("handshake without validation context: %v", err)
	}

	// A TLS socket given by name only uses the empty UpstreamTlsContext.
	cfg = mustConfig(t, &corev3.TransportSocket{Name: tlsSocketName})
	if _, err := handshake(t, srv.addr(), cfg); err != nil {
		t.Fatalf("handshake with empty context: %v", err)
	}
	if got := srv.lastSNI(t); got != "" {
		t.Errorf("server saw SNI %q, want none", got)
	}
}

func sanContext(caPEM string, matchers ...*tlsv3.SubjectAltNameMatcher) *tlsv3.CommonTlsContext {
	c := withCA(caPEM)
	c.GetValidationContext().MatchTypedSubjectAltNames = matchers
	return c
}

func san(t tlsv3.SubjectAltNameMatcher_SanType, m *matcherv3.StringMatcher) *tlsv3.SubjectAltNameMatcher {
	return &tlsv3.SubjectAltNameMatcher{SanType: t, Matcher: m}
}

func exact(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}

// TestVerificationRules proves what Envoy checks once trusted_ca is set: never the
// host name by itself, SANs only through match_typed_subject_alt_names (DNS exact
// with RFC 6125 wildcards, other matchers as strings, any-of semantics) or
// auto_sni_san_validation, which replaces the matchers with the SNI sent.
func TestVerificationRules(t *testing.T) {
	ca := newCA(t, "test CA")
	srv := startTLSServer(t, serverLeaf(t, ca).tls, nil)
	dns, uri, ip := tlsv3.SubjectAltNameMatcher_DNS, tlsv3.SubjectAltNameMatcher_URI, tlsv3.SubjectAltNameMatcher_IP_ADDRESS
	regex := func(re string) *matcherv3.StringMatcher {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: re}}}
	}
	cases := []struct {
		name    string
		ctx     *tlsv3.UpstreamTlsContext
		wantErr bool
	}{
		{"host name is not checked", &tlsv3.UpstreamTlsContext{Sni: "unrelated.example", CommonTlsContext: withCA(ca.pem)}, false},
		{"dns exact", &tlsv3.UpstreamTlsContext{CommonTlsContext: sanContext(ca.pem, san(dns, exact("API.example.test")))}, false},
		{"dns exact via wildcard SAN", &tlsv3.UpstreamTlsContext{CommonTlsContext: sanContext(ca.pem, san(dns, exact("x.wild.example.test")))}, false},
		{"wildcard covers one label only", &tlsv3.UpstreamTlsContext{CommonTlsContext: sanContext(ca.pem, san(dns, exact("a.b.wild.example.test")))}, true},
		{"dns mismatch", &tlsv3.UpstreamTlsContext{CommonTlsContext: sanContext(ca.pem, san(dns, exact("other.example.test")))}, true},
		{"any of the matchers", &tlsv3.UpstreamTlsContext{CommonTlsContext: sanContext(ca.pem,
			san(dns, exact("other.example.test")), san(dns, exact("api.example.test")))}, false},
		{"uri prefix", &tlsv3.UpstreamTlsContext{CommonTlsContext: sanContext(ca.pem,
			san(uri, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "spiffe://example.test/"}}))}, false},
		{"ip exact", &tlsv3.UpstreamTlsContext{CommonTlsContext: sanContext(ca.pem, san(ip, exact("127.0.0.1")))}, false},
		{"regex full match", &tlsv3.UpstreamTlsContext{CommonTlsContext: sanContext(ca.pem, san(dns, regex(`api\..*`)))}, false},
		{"regex must match whole SAN", &tlsv3.UpstreamTlsContext{CommonTlsContext: sanContext(ca.pem, san(dns, regex(`pi\.example\.test`)))}, true},
		{"suffix ignore_case", &tlsv3.UpstreamTlsContext{CommonTlsContext: sanContext(ca.pem,
			san(dns, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: ".EXAMPLE.TEST"}, IgnoreCase: true}))}, false},
		{"auto_sni_san_validation match", &tlsv3.UpstreamTlsContext{Sni: "api.example.test", AutoSniSanValidation: true, CommonTlsContext: withCA(ca.pem)}, false},
		{"auto_sni_san_validation mismatch", &tlsv3.UpstreamTlsContext{Sni: "other.example.test", AutoSniSanValidation: true, CommonTlsContext: withCA(ca.pem)}, true},
		{"auto_sni_san_validation replaces matchers", &tlsv3.UpstreamTlsContext{Sni: "api.example.test", AutoSniSanValidation: true,
			CommonTlsContext: sanContext(ca.pem, san(dns, exact("other.example.test")))}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustConfig(t, tlsSocket(t, tc.ctx))
			_, err := handshake(t, srv.addr(), cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("handshake error = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}

// TestTLSParameters proves Envoy's client defaults (TLS 1.2 only, its cipher and
// curve lists) and the mapping of tls_params, alpn_protocols, max_session_keys and
// allow_renegotiation.
func TestTLSParameters(t *testing.T) {
	ca := newCA(t, "test CA")
	srv := startTLSServer(t, serverLeaf(t, ca).tls, nil)

	cfg := mustConfig(t, tlsSocket(t, &tlsv3.UpstreamTlsContext{}))
	if cfg.MinVersion != tls.VersionTLS12 || cfg.MaxVersion != tls.VersionTLS12 {
		t.Errorf("default versions = %x..%x, want TLS 1.2 only", cfg.MinVersion, cfg.MaxVersion)
	}
	if !slices.Equal(cfg.CipherSuites, defaultCipherSuites()) || !slices.Equal(cfg.CurvePreferences, defaultCurves()) {
		t.Errorf("default ciphers/curves = %v / %v", cfg.CipherSuites, cfg.CurvePreferences)
	}
	if cfg.ClientSessionCache == nil || cfg.Renegotiation != tls.RenegotiateNever || cfg.NextProtos != nil {
		t.Errorf("defaults: session cache %v, renegotiation %v, ALPN %v", cfg.ClientSessionCache, cfg.Renegotiation, cfg.NextProtos)
	}
	state, err := handshake(t, srv.addr(), cfg)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if state.Version != tls.VersionTLS12 {
		t.Errorf("negotiated %x, want TLS 1.2 (Envoy's client maximum)", state.Version)
	}

	cfg = mustConfig(t, tlsSocket(t, &tlsv3.UpstreamTlsContext{
		AllowRenegotiation: true,
		MaxSessionKeys:     wrapperspb.UInt32(0),
		CommonTlsContext: &tlsv3.CommonTlsContext{
			AlpnProtocols: []string{"h2", "http/1.1"},
			TlsParams: &tlsv3.TlsParameters{
				TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3,
				CipherSuites:              []string{"[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-CHACHA20-POLY1305]", "ECDHE-RSA-AES128-GCM-SHA256"},
				EcdhCurves:                []string{"P-256"},
			},
		},
	}))
	wantCiphers := []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}
	if !slices.Equal(cfg.CipherSuites, wantCiphers) || !slices.Equal(cfg.CurvePreferences, []tls.CurveID{tls.CurveP256}) {
		t.Errorf("ciphers/curves = %v / %v", cfg.CipherSuites, cfg.CurvePreferences)
	}
	if cfg.ClientSessionCache != nil || cfg.Renegotiation != tls.RenegotiateFreelyAsClient {
		t.Errorf("session cache %v (want none), renegotiation %v", cfg.ClientSessionCache, cfg.Renegotiation)
	}
	state, err = handshake(t, srv.addr(), cfg)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	// httptest offers only http/1.1.
	if state.Version != tls.VersionTLS13 || state.NegotiatedProtocol != "http/1.1" {
		t.Errorf("negotiated %x / %q, want TLS 1.3 / http/1.1", state.Version, state.NegotiatedProtocol)
	}
}

// TestClientCertificate proves tls_certificates presents a client certificate.
func TestClientCertificate(t *testing.T) {
	ca := newCA(t, "test CA")
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	srv := startTLSServer(t, serverLeaf(t, ca).tls, pool)
	client := ca.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "envoysim"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})

	ctx := &tlsv3.UpstreamTlsContext{CommonTlsContext: withCA(ca.pem)}
	if _, err := handshake(t, srv.addr(), mustConfig(t, tlsSocket(t, ctx))); err == nil {
		t.Fatal("handshake without a client certificate succeeded against a server requiring one")
	}
	ctx.CommonTlsContext.TlsCertificates = []*tlsv3.TlsCertificate{{
		CertificateChain: inlineString(client.certPEM),
		PrivateKey:       inlineString(client.keyPEM),
	}}
	if _, err := handshake(t, srv.addr(), mustConfig(t, tlsSocket(t, ctx))); err != nil {
		t.Fatalf("handshake with client certificate: %v", err)
	}
}

// TestAutoHostSNI proves auto_host_sni needs the host name and uses it when given.
func TestAutoHostSNI(t *testing.T) {
	ts := tlsSocket(t, &tlsv3.UpstreamTlsContext{Sni: "fallback.example.test", AutoHostSni: true})
	if _, err := ClientConfig(ts); err == nil || !strings.Contains(err.Error(), "ClientConfigForHost") {
		t.Fatalf("ClientConfig with auto_host_sni: err = %v", err)
	}
	cfg, err := ClientConfigForHost(ts, "api.example.test")
	if err != nil || cfg.ServerName != "api.example.test" {
		t.Fatalf("ClientConfigForHost = %v, %v", cfg, err)
	}
	if cfg, _ := ClientConfigForHost(ts, ""); cfg.ServerName != "fallback.example.test" {
		t.Errorf("unknown host name: ServerName = %q, want the sni", cfg.ServerName)
	}
}

// TestPlaintext proves nil and raw_buffer sockets mean plaintext.
func TestPlaintext(t *testing.T) {
	raw, err := anypb.New(&rawbufferv3.RawBuffer{})
	if err != nil {
		t.Fatal(err)
	}
	for name, ts := range map[string]*corev3.TransportSocket{
		"nil":              nil,
		"raw_buffer typed": {Name: rawBufferSocketName, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: raw}},
		"raw_buffer name":  {Name: rawBufferSocketName},
	} {
		cfg, err := ClientConfig(ts)
		if cfg != nil || err != nil {
			t.Errorf("%s: ClientConfig = %v, %v; want nil, nil", name, cfg, err)
		}
	}
}

// TestRejected proves configurations that would change behaviour or security are
// refused with an error naming the field: unsupported ones wrap ErrUnsupported;
// ones Envoy itself refuses carry Envoy's reason.
func TestRejected(t *testing.T) {
	ca := newCA(t, "test CA")
	vc := func(mod func(*tlsv3.CertificateValidationContext)) *tlsv3.UpstreamTlsContext {
		v := &tlsv3.CertificateValidationContext{TrustedCa: inlineString(ca.pem)}
		mod(v)
		return &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: v}}}
	}
	common := func(c *tlsv3.CommonTlsContext) *tlsv3.UpstreamTlsContext {
		return &tlsv3.UpstreamTlsContext{CommonTlsContext: c}
	}
	sds := &tlsv3.SdsSecretConfig{Name: "secret"}
	downstream, err := anypb.New(&tlsv3.DownstreamTlsContext{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name        string
		socket      *corev3.TransportSocket // or ctx
		ctx         *tlsv3.UpstreamTlsContext
		want        string
		unsupported bool
	}{
		{name: "crl", ctx: vc(func(v *tlsv3.CertificateValidationContext) { v.Crl = inlineString("x") }),
			want: "validation_context.crl", unsupported: true},
		{name: "spki pinning", ctx: vc(func(v *tlsv3.CertificateValidationContext) { v.VerifyCertificateSpki = []string{"x"} }),
			want: "verify_certificate_spki", unsupported: true},
		{name: "allow expired", ctx: vc(func(v *tlsv3.CertificateValidationContext) { v.AllowExpiredCertificate = true }),
			want: "allow_expired_certificate", unsupported: true},
		{name: "accept untrusted", ctx: vc(func(v *tlsv3.CertificateValidationContext) {
			v.TrustChainVerification = tlsv3.CertificateValidationContext_ACCEPT_UNTRUSTED
		}), want: "trust_chain_verification", unsupported: true},
		{name: "other name SAN", ctx: vc(func(v *tlsv3.CertificateValidationContext) {
			v.MatchTypedSubjectAltNames = []*tlsv3.SubjectAltNameMatcher{san(tlsv3.SubjectAltNameMatcher_OTHER_NAME, exact("x"))}
		}), want: "OTHER_NAME", unsupported: true},
		{name: "deprecated SAN list", ctx: vc(func(v *tlsv3.CertificateValidationContext) {
			// Set through reflection: the Go field is deprecated.
			fd := v.ProtoReflect().Descriptor().Fields().ByName("match_subject_alt_names")
			v.ProtoReflect().Mutable(fd).List().Append(protoreflect.ValueOfMessage(exact("x").ProtoReflect()))
		}), want: "match_subject_alt_names", unsupported: true},
		{name: "SAN without trusted CA", ctx: vc(func(v *tlsv3.CertificateValidationContext) {
			v.TrustedCa = nil
			v.MatchTypedSubjectAltNames = []*tlsv3.SubjectAltNameMatcher{san(tlsv3.SubjectAltNameMatcher_DNS, exact("x"))}
		}), want: "without trusted CA is insecure"},
		{name: "auto SNI SAN without trusted CA", ctx: func() *tlsv3.UpstreamTlsContext {
			u := vc(func(v *tlsv3.CertificateValidationContext) { v.TrustedCa = nil })
			u.AutoSniSanValidation = true
			return u
		}(), want: "'auto_sni_san_validation' was configured without configuring a trusted CA"},
		{name: "trusted CA without certificates", ctx: vc(func(v *tlsv3.CertificateValidationContext) { v.TrustedCa = inlineString("garbage") }),
			want: "failed to load trusted CA certificates"},
		{name: "trusted CA from unset variable", ctx: vc(func(v *tlsv3.CertificateValidationContext) {
			v.TrustedCa = &corev3.DataSource{Specifier: &corev3.DataSource_EnvironmentVariable{EnvironmentVariable: "ENVOYSIM_TEST_UNSET_VARIABLE"}}
		}), want: "trusted_ca.environment_variable"},
		{name: "validation context over SDS", ctx: common(&tlsv3.CommonTlsContext{
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig{ValidationContextSdsSecretConfig: sds}}),
			want: "validation_context_sds_secret_config", unsupported: true},
		{name: "combined validation context", ctx: common(&tlsv3.CommonTlsContext{
			ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{}}}),
			want: "combined_validation_context", unsupported: true},
		{name: "certificate over SDS", ctx: common(&tlsv3.CommonTlsContext{TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sds}}),
			want: "tls_certificate_sds_secret_configs", unsupported: true},
		{name: "custom handshaker", ctx: common(&tlsv3.CommonTlsContext{CustomHandshaker: &corev3.TypedExtensionConfig{Name: "x"}}),
			want: "custom_handshaker", unsupported: true},
		{name: "key log", ctx: common(&tlsv3.CommonTlsContext{KeyLog: &tlsv3.TlsKeyLog{Path: "/tmp/keys"}}),
			want: "key_log", unsupported: true},
		{name: "signature algorithms", ctx: common(&tlsv3.CommonTlsContext{TlsParams: &tlsv3.TlsParameters{SignatureAlgorithms: []string{"x"}}}),
			want: "tls_params.signature_algorithms", unsupported: true},
		{name: "unknown cipher", ctx: common(&tlsv3.CommonTlsContext{TlsParams: &tlsv3.TlsParameters{CipherSuites: []string{"ECDHE-PSK-CHACHA20-POLY1305"}}}),
			want: `cipher "ECDHE-PSK-CHACHA20-POLY1305"`, unsupported: true},
		{name: "unknown curve", ctx: common(&tlsv3.CommonTlsContext{TlsParams: &tlsv3.TlsParameters{EcdhCurves: []string{"X448"}}}),
			want: `curve "X448"`, unsupported: true},
		{name: "two client certificates", ctx: common(&tlsv3.CommonTlsContext{TlsCertificates: []*tlsv3.TlsCertificate{{}, {}}}),
			want: "multiple TLS certificates"},
		{name: "certificate password", ctx: common(&tlsv3.CommonTlsContext{TlsCertificates: []*tlsv3.TlsCertificate{{Password: inlineString("x")}}}),
			want: "tls_certificates[0].password", unsupported: true},
		{name: "NUL in sni", ctx: &tlsv3.UpstreamTlsContext{Sni: "a\x00b"}, want: "NULL-byte"},
		{name: "downstream context", socket: &corev3.TransportSocket{Name: tlsSocketName,
			ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: downstream}}, want: "DownstreamTlsContext", unsupported: true},
		{name: "unknown socket", socket: &corev3.TransportSocket{Name: "envoy.transport_sockets.alts"},
			want: "envoy.transport_sockets.alts", unsupported: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := tc.socket
			if ts == nil {
				ts = tlsSocket(t, tc.ctx)
			}
			cfg, err := ClientConfig(ts)
			if err == nil {
				t.Fatalf("ClientConfig accepted it: %v", cfg)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
			if errors.Is(err, ErrUnsupported) != tc.unsupported {
				t.Errorf("errors.Is(err, ErrUnsupported) = %v, want %v (err %v)", !tc.unsupported, tc.unsupported, err)
			}
		})
	}
}

func TestDNSNameMatch(t *testing.T) {
	cases := []struct {
		name, san string
		want      bool
	}{
		{"api.example.com", "api.example.com", true},
		{"API.Example.com", "api.example.COM", true},
		{"test.example.com", "*.example.com", true},
		{"example.com", "*.example.com", false},
		{"a.b.example.com", "*.example.com", false},
		{"api1.example.com", "api*.example.com", true},
		{"web.example.com", "api*.example.com", false},
		{"xn--a.example.com", "xn--*.example.com", false},
		{"a.b.example.com", "a.*.example.com", false},
		{"*.example.com", "api.example.com", false},
		{"localhost", "*", false},
	}
	for _, tc := range cases {
		if got := dnsNameMatch(tc.name, tc.san); got != tc.want {
			t.Errorf("dnsNameMatch(%q, %q) = %v, want %v", tc.name, tc.san, got, tc.want)
		}
	}
}
