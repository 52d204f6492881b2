package sim

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// edgeConfig is the HCM's trust configuration: use_remote_address,
// xff_num_trusted_hops and internal_address_config
// (source/extensions/filters/network/http_connection_manager/config.cc).
type edgeConfig struct {
	useRemoteAddress bool
	xffTrustedHops   int
	// internal is nil when internal_address_config is not set: since Envoy 1.33 no
	// address is internal then (the explicit_internal_address_config guard, removed in
	// 1.36, made DefaultInternalAddressConfig trust nothing).
	internal *internalAddressConfig
	// localAddress is LocalInfo's address (Network::Utility::getLocalAddress: the first
	// non-loopback IPv4 interface address, else 127.0.0.1), appended to
	// x-forwarded-for instead of a loopback peer.
	localAddress string
}

// internalAddressConfig imitates HttpConnectionManagerConfig's InternalAddressConfig:
// cidr_ranges when set, else Network::Utility::isInternalAddress (RFC1918, fd00::/8,
// 127.0.0.1 and ::1). unix_sockets does not apply: listeners are TCP only.
type internalAddressConfig struct {
	cidrs []netip.Prefix
}

func (c *internalAddressConfig) isInternal(a netip.Addr) bool {
	a = a.Unmap()
	if len(c.cidrs) > 0 {
		for _, p := range c.cidrs {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	if a.Is4() {
		b := a.As4()
		return b[0] == 10 || (b[0] == 192 && b[1] == 168) || (b[0] == 172 && b[1] >= 16 && b[1] <= 31) || isLoopbackAddress(a)
	}
	return a.As16()[0] == 0xfd || isLoopbackAddress(a)
}

func compileEdge(pb *hcmv3.HttpConnectionManager) (edgeConfig, error) {
	e := edgeConfig{
		useRemoteAddress: pb.GetUseRemoteAddress().GetValue(),
		xffTrustedHops:   int(pb.GetXffNumTrustedHops()),
		localAddress:     localInfoAddress(),
	}
	if iac := pb.GetInternalAddressConfig(); iac != nil {
		e.internal = &internalAddressConfig{}
		for _, c := range iac.GetCidrRanges() {
			a, err := netip.ParseAddr(c.GetAddressPrefix())
			if err != nil {
				return e, fmt.Errorf("internal_address_config.cidr_ranges: malformed IP address: %s", c.GetAddressPrefix())
			}
			p, err := a.Prefix(int(c.GetPrefixLen().GetValue()))
			if err != nil {
				return e, fmt.Errorf("internal_address_config.cidr_ranges: %w", err)
			}
			e.internal.cidrs = append(e.internal.cidrs, p)
		}
	}
	return e, nil
}

// localInfoAddress imitates Network::Utility::getLocalAddress(v4).
func localInfoAddress() string {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

func (e *edgeConfig) isInternal(a netip.Addr) bool {
	return e.internal != nil && e.internal.isInternal(a)
}

// lastAddressFromXFF imitates Utility::getLastAddressFromXFF: skip numToSkip
// addresses from the right, parse the next one; single is true when XFF held exactly
// one address and none was skipped.
func lastAddressFromXFF(h *stream.Headers, numToSkip int) (addr netip.Addr, single, ok bool) {
	v, present := h.Get("x-forwarded-for")
	if !present {
		return netip.Addr{}, false, false
	}
	for range numToSkip {
		i := strings.LastIndex(v, ",")
		if i < 0 {
			return netip.Addr{}, false, false
		}
		v = v[:i]
	}
	i := strings.LastIndex(v, ",")
	if i >= 0 && i+1 < len(v) {
		v = v[i+1:]
	}
	a, err := netip.ParseAddr(strings.TrimSpace(v))
	if err != nil {
		return netip.Addr{}, false, false
	}
	return a, i < 0 && numToSkip == 0, true
}

// appendXFF imitates Utility::appendXff (values joined with ",").
func appendXFF(h *stream.Headers, addr string) {
	if v, ok := h.Get("x-forwarded-for"); ok && v != "" {
		h.Set("x-forwarded-for", v+","+addr)
		return
	}
	h.Set("x-forwarded-for", addr)
}

// internalOnlyHeaders are what ConnectionManagerUtility::cleanInternalHeaders removes
// from every external request (edge or not).
var internalOnlyHeaders = []string{
	"x-envoy-retriable-status-codes", "x-envoy-retriable-header-names", "x-envoy-retry-on",
	"x-envoy-retry-grpc-on", "x-envoy-max-retries", "x-envoy-upstream-alt-stat-name",
	"x-envoy-upstream-rq-timeout-ms", "x-envoy-upstream-rq-per-try-timeout-ms",
	"x-envoy-upstream-rq-timeout-alt-response", "x-envoy-expected-rq-timeout-ms",
	"x-envoy-force-trace", "x-envoy-ip-tags", "x-envoy-original-url",
	"x-envoy-hedge-on-per-try-timeout",
}

// edgeOnlyHeaders are removed from edge requests only.
var edgeOnlyHeaders = []string{
	"x-envoy-decorator-operation", "x-envoy-downstream-service-cluster", "x-envoy-downstream-service-node",
}

// mutateRequestHeaders imitates the trust part of
// ConnectionManagerUtility::mutateRequestHeaders (source/common/http/conn_manager_utility.cc)
// for a plaintext connection from remote: x-envoy-internal removed, referer sanitised,
// XFF appended and x-forwarded-proto overwritten with use_remote_address, the
// internal/external decision (a single trusted address that internal_address_config
// accepts), cleanInternalHeaders for external requests, x-envoy-internal: true for
// internal ones, x-envoy-external-address and a fresh x-request-id for edge requests.
// It runs on the first pass only (not on internal redirects).
func (h *hcmConfig) mutateRequestHeaders(hd *stream.Headers, remote netip.Addr) {
	e := &h.edge
	hd.Del("x-envoy-internal")
	if refs := hd.Values("referer"); len(refs) > 1 || (len(refs) == 1 && !absoluteURL(refs[0])) {
		hd.Del("referer")
	}
	var final netip.Addr
	var haveFinal, allowTrusted bool
	if e.useRemoteAddress {
		allowTrusted = !hd.Has("x-forwarded-for")
		if e.xffTrustedHops > 0 {
			final, _, haveFinal = lastAddressFromXFF(hd, e.xffTrustedHops-1)
		}
		if !haveFinal {
			final, haveFinal = remote, remote.IsValid()
		}
		if isLoopbackAddress(remote) {
			appendXFF(hd, e.localAddress)
		} else if remote.IsValid() {
			appendXFF(hd, remote.Unmap().String())
		}
		// An untrusted previous hop's x-forwarded-proto is overwritten.
		if e.xffTrustedHops == 0 || !hd.Has("x-forwarded-proto") {
			hd.Set("x-forwarded-proto", "http")
		}
	} else {
		// The default original IP detection extension (XFF, xff_num_trusted_hops).
		final, allowTrusted, haveFinal = lastAddressFromXFF(hd, e.xffTrustedHops)
	}
	if !hd.Has("x-forwarded-proto") {
		hd.Set("x-forwarded-proto", "http")
	}
	internal := allowTrusted && haveFinal && e.isInternal(final)
	if !haveFinal {
		final, haveFinal = remote, remote.IsValid()
	}
	edge := !internal && e.useRemoteAddress
	if internal {
		hd.Set("x-envoy-internal", "true")
	} else {
		if edge {
			for _, k := range edgeOnlyHeaders {
				hd.Del(k)
			}
		}
		for _, k := range internalOnlyHeaders {
			hd.Del(k)
		}
	}
	if edge && haveFinal {
		hd.Set("x-envoy-external-address", final.Unmap().String())
	}
	// x-request-id: always set for edge requests (preserve_external_request_id false),
	// else only when absent (UUIDRequestIDExtension::set).
	if h.generateRequestID && (edge || !hd.Has("x-request-id")) {
		hd.Set("x-request-id", uuid4())
	}
}

// isLoopbackAddress imitates Network::Utility::isLoopbackAddress: 127.0.0.1 or ::1 only.
func isLoopbackAddress(a netip.Addr) bool {
	return a.Unmap() == netip.AddrFrom4([4]byte{127, 0, 0, 1}) || a == netip.IPv6Loopback()
}

// absoluteURL imitates Utility::Url::initialize(referer, false): scheme and host required.
func absoluteURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && u.Host != ""
}
