package sim_test

import (
	"net/http"
	"strings"
	"testing"
)

// Headers a client sends to probe the HCM's sanitisation.
var probeHeaders = []string{
	"X-Cluster", "a",
	"x-envoy-internal", "true",
	"x-envoy-force-trace", "1",
	"x-envoy-upstream-alt-stat-name", "s",
	"x-envoy-ip-tags", "t",
	"x-envoy-downstream-service-cluster", "c",
	"x-request-id", "client-id",
}

func sanitizeEnv(t *testing.T, hcm ...string) (*env, *upstream) {
	t.Helper()
	u := newUpstream(t, nil)
	return start(t, cfg{hcm: hcm, clusters: []string{clusterYAML("a", "", []string{endpointYAML(u.addr(), "")})}}), u
}

func send(t *testing.T, e *env, u *upstream, extra ...string) http.Header {
	t.Helper()
	mustOK(t, await(t, e.do("GET", "/", "", append(append([]string{}, probeHeaders...), extra...)...)), 200)
	return u.next(t).Header
}

func wantHeader(t *testing.T, h http.Header, key, want string) {
	t.Helper()
	if got := strings.Join(h.Values(key), ","); got != want {
		t.Fatalf("%s = %q, want %q (headers %v)", key, got, want, h)
	}
}

// Without use_remote_address and without internal_address_config nothing is internal
// (Envoy ≥ 1.33): cleanInternalHeaders strips the client's x-envoy-* control headers
// and x-envoy-internal; the request is not an edge request.
func TestSanitiseExternalByDefault(t *testing.T) {
	e, u := sanitizeEnv(t)
	h := send(t, e, u, "x-forwarded-for", "10.0.0.1")
	for _, k := range []string{"x-envoy-internal", "x-envoy-force-trace", "x-envoy-upstream-alt-stat-name", "x-envoy-ip-tags", "x-envoy-external-address"} {
		wantHeader(t, h, k, "")
	}
	wantHeader(t, h, "x-envoy-downstream-service-cluster", "c") // removed from edge requests only
	wantHeader(t, h, "x-request-id", "client-id")
	wantHeader(t, h, "x-forwarded-for", "10.0.0.1")
}

// internal_address_config without cidr_ranges trusts RFC1918: a single internal XFF
// address makes the request internal.
func TestSanitiseInternalByXFF(t *testing.T) {
	e, u := sanitizeEnv(t, "internal_address_config: {}")
	h := send(t, e, u, "x-forwarded-for", "10.0.0.1")
	wantHeader(t, h, "x-envoy-internal", "true")
	wantHeader(t, h, "x-envoy-force-trace", "1")
	wantHeader(t, h, "x-envoy-upstream-alt-stat-name", "s")
	// Two addresses: not a single trusted address, so external.
	h = send(t, e, u, "x-forwarded-for", "10.0.0.2,10.0.0.1")
	wantHeader(t, h, "x-envoy-internal", "")
	wantHeader(t, h, "x-envoy-force-trace", "")
}

// use_remote_address: the peer (loopback here, not internal by default) is an edge
// client: XFF appended, x-forwarded-proto overwritten, edge-only headers removed,
// x-envoy-external-address set, x-request-id regenerated.
func TestSanitiseEdge(t *testing.T) {
	e, u := sanitizeEnv(t, "use_remote_address: true")
	h := send(t, e, u, "x-forwarded-for", "1.2.3.4", "x-forwarded-proto", "https")
	xff := strings.Split(h.Get("x-forwarded-for"), ",")
	if len(xff) != 2 || xff[0] != "1.2.3.4" || xff[1] == "" {
		t.Fatalf("x-forwarded-for %q", h.Get("x-forwarded-for"))
	}
	wantHeader(t, h, "x-forwarded-proto", "http")
	wantHeader(t, h, "x-envoy-external-address", "127.0.0.1")
	wantHeader(t, h, "x-envoy-downstream-service-cluster", "")
	wantHeader(t, h, "x-envoy-force-trace", "")
	wantHeader(t, h, "x-envoy-internal", "")
	if id := h.Get("x-request-id"); id == "client-id" || id == "" {
		t.Fatalf("x-request-id %q", id)
	}
}

// xff_num_trusted_hops: the client address is taken from XFF, and a trusted hop's
// x-forwarded-proto is kept.
func TestSanitiseTrustedHops(t *testing.T) {
	e, u := sanitizeEnv(t, "use_remote_address: true", "xff_num_trusted_hops: 1")
	h := send(t, e, u, "x-forwarded-for", "1.2.3.4", "x-forwarded-proto", "https")
	wantHeader(t, h, "x-envoy-external-address", "1.2.3.4")
	wantHeader(t, h, "x-forwarded-proto", "https")
}

// use_remote_address with the loopback peer listed in cidr_ranges: internal.
func TestSanitiseInternalPeer(t *testing.T) {
	e, u := sanitizeEnv(t, "use_remote_address: true",
		"internal_address_config: {cidr_ranges: [{address_prefix: 127.0.0.1, prefix_len: 32}]}")
	h := send(t, e, u)
	wantHeader(t, h, "x-envoy-internal", "true")
	wantHeader(t, h, "x-envoy-force-trace", "1")
	wantHeader(t, h, "x-envoy-external-address", "")
	wantHeader(t, h, "x-request-id", "client-id")
	if h.Get("x-forwarded-for") == "" {
		t.Fatalf("no x-forwarded-for appended: %v", h)
	}
}
