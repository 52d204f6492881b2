package upstreamtls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"strings"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// verifier applies Envoy's default certificate validator to a server certificate
// (source/common/tls/cert_validator/default_validator.cc). The zero value verifies
// nothing, which is Envoy's behaviour without a validation context.
type verifier struct {
	roots      *x509.CertPool // trusted_ca; nil = chain not verified
	sans       []sanMatcher   // match_typed_subject_alt_names
	autoSNISAN bool           // auto_sni_san_validation
}

func parseValidation(path string, vc *tlsv3.CertificateValidationContext, autoSNISAN bool) (verifier, error) {
	// watched_directory only matters for contexts delivered by SDS (not supported);
	// suppress_client_ca_list only affects downstream contexts. Both are no-ops here,
	// as in Envoy. match_subject_alt_names is accepted only when Envoy would ignore it.
	if err := onlyFields(path, vc, "trusted_ca", "match_typed_subject_alt_names", "match_subject_alt_names",
		"watched_directory", "suppress_client_ca_list"); err != nil {
		return verifier{}, err
	}
	// Read through reflection: the Go getter is deprecated along with the field.
	deprecatedSANs := vc.ProtoReflect().Descriptor().Fields().ByName("match_subject_alt_names")
	if vc.ProtoReflect().Has(deprecatedSANs) && len(vc.GetMatchTypedSubjectAltNames()) == 0 {
		return verifier{}, fmt.Errorf("%s.match_subject_alt_names (deprecated; use match_typed_subject_alt_names): %w", path, ErrUnsupported)
	}
	v := verifier{autoSNISAN: autoSNISAN}
	if vc.GetTrustedCa() != nil {
		pemData, err := readDataSource(path+".trusted_ca", vc.GetTrustedCa())
		if err != nil {
			return verifier{}, err
		}
		if v.roots, err = parseCAs(path+".trusted_ca", pemData); err != nil {
			return verifier{}, err
		}
	}
	for i, m := range vc.GetMatchTypedSubjectAltNames() {
		sm, err := parseSANMatcher(fmt.Sprintf("%s.match_typed_subject_alt_names[%d]", path, i), m)
		if err != nil {
			return verifier{}, err
		}
		v.sans = append(v.sans, sm)
	}
	// Configurations Envoy refuses as insecure.
	if v.roots == nil && len(v.sans) > 0 {
		return verifier{}, fmt.Errorf("%s: SAN-based verification of peer certificates without trusted CA is insecure and not allowed", path)
	}
	if v.roots == nil && autoSNISAN {
		return verifier{}, fmt.Errorf("%s: 'auto_sni_san_validation' was configured without configuring a trusted CA", path)
	}
	return v, nil
}

// verifyConnection is tls.Config.VerifyConnection; it runs on full and resumed
// handshakes alike. cs.ServerName is the SNI actually sent.
func (v verifier) verifyConnection(cs tls.ConnectionState) error {
	if v.roots == nil {
		return nil // nothing to verify: SAN checks need trusted_ca (enforced at parse)
	}
	if len(cs.PeerCertificates) == 0 {
		return errors.New("upstreamtls: verify cert failed: empty cert chain")
	}
	leaf := cs.PeerCertificates[0]
	intermediates := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		intermediates.AddCert(c)
	}
	// No DNSName: Envoy does not compare the host name with the certificate. Every
	// trusted_ca certificate is an anchor, as with X509_V_FLAG_PARTIAL_CHAIN; the
	// serverAuth purpose matches BoringSSL's "ssl_server" verify parameters.
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:         v.roots,
		Intermediates: intermediates,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return fmt.Errorf("upstreamtls: verify cert failed: %w", err)
	}
	matchers := v.sans
	if v.autoSNISAN && cs.ServerName != "" {
		// auto_sni_san_validation replaces the configured matchers with a DNS SAN
		// match on the SNI sent.
		matchers = []sanMatcher{{sanType: tlsv3.SubjectAltNameMatcher_DNS, dnsExact: cs.ServerName, exact: true}}
	}
	if len(matchers) == 0 {
		return nil
	}
	for _, m := range matchers {
		if m.matchCert(leaf) {
			return nil
		}
	}
	return fmt.Errorf("upstreamtls: verify cert failed: SAN matcher, certificate SANs are %v", certSANs(leaf))
}

// sanMatcher is one SubjectAltNameMatcher.
type sanMatcher struct {
	sanType  tlsv3.SubjectAltNameMatcher_SanType
	exact    bool   // DNS exact: RFC 6125 wildcard matching against the certificate
	dnsExact string // the configured DNS name when exact
	match    func(string) bool
}

func parseSANMatcher(path string, m *tlsv3.SubjectAltNameMatcher) (sanMatcher, error) {
	// oid only applies to OTHER_NAME, which is rejected below.
	if err := onlyFields(path, m, "san_type", "matcher", "oid"); err != nil {
		return sanMatcher{}, err
	}
	switch m.GetSanType() {
	case tlsv3.SubjectAltNameMatcher_DNS, tlsv3.SubjectAltNameMatcher_URI,
		tlsv3.SubjectAltNameMatcher_EMAIL, tlsv3.SubjectAltNameMatcher_IP_ADDRESS:
	case tlsv3.SubjectAltNameMatcher_OTHER_NAME:
		return sanMatcher{}, fmt.Errorf("%s.san_type OTHER_NAME: %w", path, ErrUnsupported)
	default:
		return sanMatcher{}, fmt.Errorf("%s.san_type: %v is not a valid SAN type", path, m.GetSanType())
	}
	if m.GetMatcher() == nil {
		return sanMatcher{}, fmt.Errorf("%s.matcher: missing", path)
	}
	sm := sanMatcher{sanType: m.GetSanType()}
	// A DNS SAN with an exact matcher follows DNS matching rules, not string
	// equality (SubjectAltNameMatcher.matcher docs; StringSanMatcher::match).
	if exact, ok := m.GetMatcher().GetMatchPattern().(*matcherv3.StringMatcher_Exact); ok && sm.sanType == tlsv3.SubjectAltNameMatcher_DNS {
		if err := onlyFields(path+".matcher", m.GetMatcher(), "exact", "ignore_case"); err != nil {
			return sanMatcher{}, err
		}
		sm.exact, sm.dnsExact = true, exact.Exact
		return sm, nil
	}
	match, err := stringMatcher(path+".matcher", m.GetMatcher())
	if err != nil {
		return sanMatcher{}, err
	}
	sm.match = match
	return sm, nil
}

func (m sanMatcher) matchCert(cert *x509.Certificate) bool {
	for _, san := range sansOfType(cert, m.sanType) {
		if m.exact {
			if dnsNameMatch(m.dnsExact, san) {
				return true
			}
		} else if m.match(san) {
			return true
		}
	}
	return false
}

func sansOfType(cert *x509.Certificate, t tlsv3.SubjectAltNameMatcher_SanType) []string {
	var out []string
	switch t {
	case tlsv3.SubjectAltNameMatcher_DNS:
		out = cert.DNSNames
	case tlsv3.SubjectAltNameMatcher_EMAIL:
		out = cert.EmailAddresses
	case tlsv3.SubjectAltNameMatcher_URI:
		for _, u := range cert.URIs {
			out = append(out, u.String())
		}
	case tlsv3.SubjectAltNameMatcher_IP_ADDRESS:
		for _, ip := range cert.IPAddresses {
			out = append(out, ip.String())
		}
	}
	return out
}

func certSANs(cert *x509.Certificate) []string {
	var out []string
	for _, t := range []tlsv3.SubjectAltNameMatcher_SanType{
		tlsv3.SubjectAltNameMatcher_DNS, tlsv3.SubjectAltNameMatcher_URI,
		tlsv3.SubjectAltNameMatcher_EMAIL, tlsv3.SubjectAltNameMatcher_IP_ADDRESS,
	} {
		out = append(out, sansOfType(cert, t)...)
	}
	return out
}

// stringMatcher implements type.matcher.v3.StringMatcher: exact, prefix, suffix and
// contains honour ignore_case; safe_regex must match the whole string (RE2 full
// match; Go's regexp is RE2) and ignores ignore_case, as documented.
func stringMatcher(path string, sm *matcherv3.StringMatcher) (func(string) bool, error) {
	if err := onlyFields(path, sm, "exact", "prefix", "suffix", "safe_regex", "contains", "ignore_case"); err != nil {
		return nil, err
	}
	fold := func(s string) string { return s }
	if sm.GetIgnoreCase() {
		fold = strings.ToLower
	}
	switch p := sm.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		want := fold(p.Exact)
		return func(s string) bool { return fold(s) == want }, nil
	case *matcherv3.StringMatcher_Prefix:
		want := fold(p.Prefix)
		return func(s string) bool { return strings.HasPrefix(fold(s), want) }, nil
	case *matcherv3.StringMatcher_Suffix:
		want := fold(p.Suffix)
		return func(s string) bool { return strings.HasSuffix(fold(s), want) }, nil
	case *matcherv3.StringMatcher_Contains:
		want := fold(p.Contains)
		return func(s string) bool { return strings.Contains(fold(s), want) }, nil
	case *matcherv3.StringMatcher_SafeRegex:
		// google_re2 is deprecated and has no effect.
		if err := onlyFields(path+".safe_regex", p.SafeRegex, "google_re2", "regex"); err != nil {
			return nil, err
		}
		re, err := regexp.Compile(`^(?:` + p.SafeRegex.GetRegex() + `)$`)
		if err != nil {
			return nil, fmt.Errorf("%s.safe_regex.regex: %w", path, err)
		}
		return re.MatchString, nil
	default:
		return nil, fmt.Errorf("%s: no match pattern set", path)
	}
}

// dnsNameMatch reports whether the configured DNS name matches a certificate DNS SAN,
// which may carry a wildcard, per RFC 6125 section 6.4.3 as Envoy applies it: names
// compare case-insensitively; only the left-most label of the SAN may hold a
// wildcard, once (so "*.example.com" and "api*.example.com" are patterns), it
// matches exactly one label, and it is not honoured in an A-label ("xn--").
func dnsNameMatch(name, san string) bool {
	name, san = strings.ToLower(name), strings.ToLower(san)
	if name == san {
		return true
	}
	sanLabel, sanRest, ok := strings.Cut(san, ".")
	if !ok {
		return false
	}
	nameLabel, nameRest, ok := strings.Cut(name, ".")
	if !ok {
		return false
	}
	if !strings.Contains(sanLabel, "*") || strings.Contains(sanRest, "*") || strings.HasPrefix(sanLabel, "xn--") {
		return false
	}
	if nameRest != sanRest {
		return false
	}
	if sanLabel == "*" {
		return true
	}
	if strings.Count(sanLabel, "*") != 1 {
		return false
	}
	before, after, _ := strings.Cut(sanLabel, "*")
	return len(sanLabel) <= len(nameLabel)+1 && strings.HasPrefix(nameLabel, before) && strings.HasSuffix(nameLabel, after)
}
