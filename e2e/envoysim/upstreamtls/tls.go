package upstreamtls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ErrUnsupported is wrapped by every error about a configuration field envoysim does
// not implement.
var ErrUnsupported = errors.New("not supported by envoysim")

const (
	tlsSocketName       = "envoy.transport_sockets.tls"
	rawBufferSocketName = "envoy.transport_sockets.raw_buffer"
	upstreamTLSType     = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"
	rawBufferType       = "type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer"
)

// ClientConfig builds a *tls.Config from an envoy.transport_sockets.tls
// UpstreamTlsContext. It returns nil, nil for a nil socket or raw_buffer (plaintext).
//
// Behaviour, as Envoy's client TLS context:
//   - sni becomes ServerName, sent as SNI. No SNI is sent when it is empty. Dial with
//     tls.Client on an established connection: tls.Dial and http.Transport fill an
//     empty ServerName from the address, which Envoy never does.
//   - Server certificates are verified only as Envoy's default validator does. With
//     no validation_context nothing is verified ("Server certificate verification
//     is not enabled by default", UpstreamTlsContext.common_tls_context). With
//     trusted_ca (filename, inline_string, inline_bytes or environment_variable) the
//     chain must lead to one of its certificates, any of which may be an
//     intermediate (X509_V_FLAG_PARTIAL_CHAIN). The host name is NOT compared with
//     the certificate: Envoy checks names only through match_typed_subject_alt_names
//     or auto_sni_san_validation. Go's own check is therefore disabled
//     (InsecureSkipVerify) and VerifyConnection does Envoy's checks; RootCAs carries
//     the trusted_ca pool for inspection.
//   - match_typed_subject_alt_names: DNS, URI, EMAIL and IP_ADDRESS matchers with
//     exact/prefix/suffix/contains/safe_regex and ignore_case; "any" semantics; DNS
//     exact follows RFC 6125 wildcards. auto_sni_san_validation replaces them with a
//     DNS match on the SNI sent. Both require trusted_ca, as in Envoy.
//   - tls_params: protocol versions default to TLS 1.2..1.2 (Envoy's client
//     default); cipher_suites and ecdh_curves take BoringSSL names and default to
//     Envoy's client lists.
//   - alpn_protocols becomes NextProtos. When it is empty Envoy's connection pool
//     may still offer a protocol (h2 for HTTP/2 clusters); that depends on the
//     cluster, so it is the caller's to add.
//   - tls_certificates (at most one, certificate_chain + private_key) is the client
//     certificate; allow_renegotiation allows server renegotiation; max_session_keys
//     sizes the session cache (default 1, 0 disables resumption). Reuse the returned
//     config per cluster so resumption works as in Envoy.
//
// Anything else that is set (SDS, certificate providers, CRLs, pinning, custom
// validators or handshakers, key logging, ...) is an error wrapping ErrUnsupported
// that names the field. auto_host_sni needs the upstream host: use ClientConfigForHost.
func ClientConfig(ts *corev3.TransportSocket) (*tls.Config, error) {
	cc, err := parseSocket(ts)
	if err != nil || cc == nil {
		return nil, err
	}
	if cc.autoHostSNI {
		return nil, errors.New("upstreamtls: UpstreamTlsContext.auto_host_sni needs the upstream host name: use ClientConfigForHost")
	}
	return cc.config(cc.sni), nil
}

// ClientConfigForHost is ClientConfig for one upstream host. hostname is the host's
// name as Envoy knows it: the DNS name a STRICT_DNS/LOGICAL_DNS cluster resolved, or
// Endpoint.hostname. With auto_host_sni it replaces sni, unless it is empty, in
// which case sni is used as Envoy does when the host name is unknown.
func ClientConfigForHost(ts *corev3.TransportSocket, hostname string) (*tls.Config, error) {
	cc, err := parseSocket(ts)
	if err != nil || cc == nil {
		return nil, err
	}
	serverName := cc.sni
	if cc.autoHostSNI && hostname != "" {
		serverName = hostname
	}
	return cc.config(serverName), nil
}

// clientContext is a validated UpstreamTlsContext.
type clientContext struct {
	sni         string
	autoHostSNI bool
	renegotiate bool
	sessionKeys int
	minVersion  uint16
	maxVersion  uint16
	ciphers     []uint16
	curves      []tls.CurveID
	alpn        []string
	certs       []tls.Certificate
	verify      verifier
}

func (cc *clientContext) config(serverName string) *tls.Config {
	cfg := &tls.Config{
		ServerName:       serverName,
		NextProtos:       cc.alpn,
		MinVersion:       cc.minVersion,
		MaxVersion:       cc.maxVersion,
		CipherSuites:     cc.ciphers,
		CurvePreferences: cc.curves,
		Certificates:     cc.certs,
		RootCAs:          cc.verify.roots,
		// Go would check the certificate against ServerName; Envoy never does.
		// VerifyConnection below applies Envoy's rules instead.
		InsecureSkipVerify: true,
		VerifyConnection:   cc.verify.verifyConnection,
	}
	if cc.renegotiate {
		cfg.Renegotiation = tls.RenegotiateFreelyAsClient
	}
	if cc.sessionKeys > 0 {
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(cc.sessionKeys)
	}
	return cfg
}

// parseSocket validates ts; a nil result (and nil error) means plaintext.
func parseSocket(ts *corev3.TransportSocket) (*clientContext, error) {
	if ts == nil {
		return nil, nil
	}
	var ctx *tlsv3.UpstreamTlsContext
	switch cfg := ts.GetConfigType().(type) {
	case nil:
		// No typed_config: Envoy finds the factory by name and uses its empty config.
		switch ts.GetName() {
		case rawBufferSocketName:
			return nil, nil
		case tlsSocketName:
			ctx = &tlsv3.UpstreamTlsContext{}
		default:
			return nil, fmt.Errorf("upstreamtls: transport socket %q: %w", ts.GetName(), ErrUnsupported)
		}
	case *corev3.TransportSocket_TypedConfig:
		// Envoy picks the factory by the typed_config type URL.
		switch typeURL := cfg.TypedConfig.GetTypeUrl(); typeURL {
		case rawBufferType:
			return nil, nil
		case upstreamTLSType:
			ctx = &tlsv3.UpstreamTlsContext{}
			if err := cfg.TypedConfig.UnmarshalTo(ctx); err != nil {
				return nil, fmt.Errorf("upstreamtls: decode UpstreamTlsContext: %w", err)
			}
		default:
			return nil, fmt.Errorf("upstreamtls: transport socket %q with typed_config %s: %w", ts.GetName(), typeURL, ErrUnsupported)
		}
	default:
		return nil, fmt.Errorf("upstreamtls: transport socket %q: unexpected config type %T", ts.GetName(), cfg)
	}
	cc, err := parseUpstream(ctx)
	if err != nil {
		return nil, fmt.Errorf("upstreamtls: %w", err)
	}
	return cc, nil
}

func parseUpstream(u *tlsv3.UpstreamTlsContext) (*clientContext, error) {
	const path = "UpstreamTlsContext"
	// enforce_rsa_key_usage is accepted because Envoy ignores it (deprecated; the key
	// usage is always enforced).
	if err := onlyFields(path, u, "common_tls_context", "sni", "auto_host_sni",
		"auto_sni_san_validation", "allow_renegotiation", "max_session_keys", "enforce_rsa_key_usage"); err != nil {
		return nil, err
	}
	if strings.ContainsRune(u.GetSni(), 0) {
		return nil, fmt.Errorf("%s.sni: SNI names containing NULL-byte are not allowed", path)
	}
	cc := &clientContext{
		sni:         u.GetSni(),
		autoHostSNI: u.GetAutoHostSni(),
		renegotiate: u.GetAllowRenegotiation(),
		sessionKeys: 1,
		minVersion:  tls.VersionTLS12,
		maxVersion:  tls.VersionTLS12,
		ciphers:     defaultCipherSuites(),
		curves:      defaultCurves(),
	}
	if u.GetMaxSessionKeys() != nil {
		cc.sessionKeys = int(u.GetMaxSessionKeys().GetValue())
	}
	if err := cc.parseCommon(path+".common_tls_context", u.GetCommonTlsContext(), u.GetAutoSniSanValidation()); err != nil {
		return nil, err
	}
	return cc, nil
}

func (cc *clientContext) parseCommon(path string, c *tlsv3.CommonTlsContext, autoSNISAN bool) error {
	if err := onlyFields(path, c, "tls_params", "tls_certificates", "validation_context", "alpn_protocols"); err != nil {
		return err
	}
	cc.alpn = c.GetAlpnProtocols()
	if p := c.GetTlsParams(); p != nil {
		if err := cc.parseParams(path+".tls_params", p); err != nil {
			return err
		}
	}
	if n := len(c.GetTlsCertificates()); n > 1 {
		return fmt.Errorf("%s.tls_certificates: multiple TLS certificates are not supported for client contexts", path)
	}
	for i, cert := range c.GetTlsCertificates() {
		certPath := fmt.Sprintf("%s.tls_certificates[%d]", path, i)
		if err := onlyFields(certPath, cert, "certificate_chain", "private_key"); err != nil {
			return err
		}
		if cert.GetCertificateChain() == nil && cert.GetPrivateKey() == nil {
			continue // Envoy skips an empty certificate entry
		}
		chain, err := readDataSource(certPath+".certificate_chain", cert.GetCertificateChain())
		if err != nil {
			return err
		}
		key, err := readDataSource(certPath+".private_key", cert.GetPrivateKey())
		if err != nil {
			return err
		}
		pair, err := tls.X509KeyPair(chain, key)
		if err != nil {
			return fmt.Errorf("%s: load certificate: %w", certPath, err)
		}
		cc.certs = append(cc.certs, pair)
	}
	// Without a validation context Envoy has no validator config at all, so even
	// auto_sni_san_validation has no effect (DefaultCertValidator only looks at it
	// through the validation context config).
	if vc := c.GetValidationContext(); vc != nil {
		v, err := parseValidation(path+".validation_context", vc, autoSNISAN)
		if err != nil {
			return err
		}
		cc.verify = v
	}
	return nil
}

func (cc *clientContext) parseParams(path string, p *tlsv3.TlsParameters) error {
	if err := onlyFields(path, p, "tls_minimum_protocol_version", "tls_maximum_protocol_version",
		"cipher_suites", "ecdh_curves"); err != nil {
		return err
	}
	var err error
	if cc.minVersion, err = tlsVersion(path+".tls_minimum_protocol_version", p.GetTlsMinimumProtocolVersion(), cc.minVersion); err != nil {
		return err
	}
	if cc.maxVersion, err = tlsVersion(path+".tls_maximum_protocol_version", p.GetTlsMaximumProtocolVersion(), cc.maxVersion); err != nil {
		return err
	}
	// A minimum above the maximum is not a config error in Envoy either; the
	// handshake fails, as it does in Go.
	if len(p.GetCipherSuites()) > 0 {
		if cc.ciphers, err = cipherSuites(path+".cipher_suites", p.GetCipherSuites()); err != nil {
			return err
		}
	}
	if len(p.GetEcdhCurves()) > 0 {
		if cc.curves, err = curves(path+".ecdh_curves", p.GetEcdhCurves()); err != nil {
			return err
		}
	}
	return nil
}

// readDataSource reads a config.core.v3.DataSource.
func readDataSource(path string, ds *corev3.DataSource) ([]byte, error) {
	if ds == nil {
		return nil, fmt.Errorf("%s: missing", path)
	}
	if err := onlyFields(path, ds, "filename", "inline_bytes", "inline_string", "environment_variable"); err != nil {
		return nil, err
	}
	switch s := ds.GetSpecifier().(type) {
	case *corev3.DataSource_Filename:
		b, err := os.ReadFile(s.Filename)
		if err != nil {
			return nil, fmt.Errorf("%s.filename: %w", path, err)
		}
		return b, nil
	case *corev3.DataSource_InlineBytes:
		return s.InlineBytes, nil
	case *corev3.DataSource_InlineString:
		return []byte(s.InlineString), nil
	case *corev3.DataSource_EnvironmentVariable:
		v, ok := os.LookupEnv(s.EnvironmentVariable)
		if !ok {
			return nil, fmt.Errorf("%s.environment_variable: %q is not set", path, s.EnvironmentVariable)
		}
		return []byte(v), nil
	default:
		// DataSource's specifier is a required oneof.
		return nil, fmt.Errorf("%s: no data source set", path)
	}
}

// onlyFields fails on the first populated field of m (in field-number order) that
// is not in allowed, and on unknown fields, so that fields added to Envoy's API
// later are rejected rather than ignored.
func onlyFields(path string, m proto.Message, allowed ...string) error {
	r := m.ProtoReflect()
	fields := r.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if r.Has(fd) && !contains(allowed, fd.Name()) {
			return fmt.Errorf("%s.%s: %w", path, fd.Name(), ErrUnsupported)
		}
	}
	if len(r.GetUnknown()) > 0 {
		return fmt.Errorf("%s: unknown fields: %w", path, ErrUnsupported)
	}
	return nil
}

func contains(allowed []string, name protoreflect.Name) bool {
	for _, a := range allowed {
		if protoreflect.Name(a) == name {
			return true
		}
	}
	return false
}

// parseCAs parses PEM certificates into a pool; Envoy fails when none is found.
func parseCAs(path string, pemData []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("%s: failed to load trusted CA certificates", path)
	}
	return pool, nil
}
