package upstreamtls

import (
	"crypto/tls"
	"fmt"
	"strings"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// tlsVersion maps TlsParameters.TlsProtocol; TLS_AUTO keeps Envoy's client default.
func tlsVersion(path string, v tlsv3.TlsParameters_TlsProtocol, def uint16) (uint16, error) {
	switch v {
	case tlsv3.TlsParameters_TLS_AUTO:
		return def, nil
	case tlsv3.TlsParameters_TLSv1_0:
		return tls.VersionTLS10, nil
	case tlsv3.TlsParameters_TLSv1_1:
		return tls.VersionTLS11, nil
	case tlsv3.TlsParameters_TLSv1_2:
		return tls.VersionTLS12, nil
	case tlsv3.TlsParameters_TLSv1_3:
		return tls.VersionTLS13, nil
	default:
		return 0, fmt.Errorf("%s: unknown TLS version %d", path, v)
	}
}

// defaultCipherSuites is Envoy's non-FIPS client cipher list for TLS 1.0-1.2
// (ClientContextConfigImpl::DEFAULT_CIPHER_SUITES). TLS 1.3 suites are fixed in both
// BoringSSL and Go.
func defaultCipherSuites() []uint16 {
	return []uint16{
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
		tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	}
}

// defaultCurves is Envoy's non-FIPS client curve list
// (ClientContextConfigImpl::DEFAULT_CURVES).
func defaultCurves() []tls.CurveID {
	return []tls.CurveID{tls.X25519, tls.CurveP256}
}

// cipherID maps a BoringSSL cipher name, as Envoy accepts in
// TlsParameters.cipher_suites, to Go's identifier, for the suites Go implements.
func cipherID(name string) (uint16, bool) {
	switch name {
	case "ECDHE-ECDSA-AES128-GCM-SHA256":
		return tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, true
	case "ECDHE-RSA-AES128-GCM-SHA256":
		return tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, true
	case "ECDHE-ECDSA-AES256-GCM-SHA384":
		return tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, true
	case "ECDHE-RSA-AES256-GCM-SHA384":
		return tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, true
	case "ECDHE-ECDSA-CHACHA20-POLY1305":
		return tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, true
	case "ECDHE-RSA-CHACHA20-POLY1305":
		return tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, true
	case "ECDHE-ECDSA-AES128-SHA":
		return tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, true
	case "ECDHE-RSA-AES128-SHA":
		return tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, true
	case "ECDHE-ECDSA-AES256-SHA":
		return tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, true
	case "ECDHE-RSA-AES256-SHA":
		return tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA, true
	case "AES128-GCM-SHA256":
		return tls.TLS_RSA_WITH_AES_128_GCM_SHA256, true
	case "AES256-GCM-SHA384":
		return tls.TLS_RSA_WITH_AES_256_GCM_SHA384, true
	case "AES128-SHA":
		return tls.TLS_RSA_WITH_AES_128_CBC_SHA, true
	case "AES256-SHA":
		return tls.TLS_RSA_WITH_AES_256_CBC_SHA, true
	}
	return 0, false
}

// cipherSuites maps configured names. An entry may be a BoringSSL equal-preference
// group "[A|B]"; Go clients do not send a preference order of their own, so groups
// are flattened. Any name Go cannot offer is an error rather than a silent drop.
func cipherSuites(path string, names []string) ([]uint16, error) {
	var out []uint16
	for _, entry := range names {
		for name := range strings.SplitSeq(strings.Trim(entry, "[]"), "|") {
			id, ok := cipherID(name)
			if !ok {
				return nil, fmt.Errorf("%s: cipher %q: %w", path, name, ErrUnsupported)
			}
			out = append(out, id)
		}
	}
	return out, nil
}

// curveID maps a BoringSSL curve name (TlsParameters.ecdh_curves) to Go's.
func curveID(name string) (tls.CurveID, bool) {
	switch name {
	case "X25519":
		return tls.X25519, true
	case "P-256":
		return tls.CurveP256, true
	case "P-384":
		return tls.CurveP384, true
	case "P-521":
		return tls.CurveP521, true
	case "X25519MLKEM768":
		return tls.X25519MLKEM768, true
	}
	return 0, false
}

func curves(path string, names []string) ([]tls.CurveID, error) {
	out := make([]tls.CurveID, 0, len(names))
	for _, name := range names {
		id, ok := curveID(name)
		if !ok {
			return nil, fmt.Errorf("%s: curve %q: %w", path, name, ErrUnsupported)
		}
		out = append(out, id)
	}
	return out, nil
}
