package xds

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	mutationv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	codecv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/upstream_codec/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rawbufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/routing/config"
)

// Names Envoy and the attempt role agree on.
const (
	httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	extProcFilterName      = "envoy.filters.http.ext_proc"
	upstreamCodecName      = "envoy.filters.http.upstream_codec"
	tlsSocketName          = "envoy.transport_sockets.tls"
	rawBufferSocketName    = "envoy.transport_sockets.raw_buffer"
	// transportSocketMatchNS is the endpoint metadata namespace Envoy's
	// transport_socket_matches read (cluster.proto TransportSocketMatch.match).
	transportSocketMatchNS = "envoy.transport_socket_match"
	// endpointLabel is switchyard's label in that namespace: provider or trampoline.
	endpointLabel = "switchyard.endpoint"
)

// upstream is a deployment's provider endpoint, from its base URL.
type upstream struct {
	host string
	port uint32
	tls  bool
}

// parseBaseURL reads host, port and scheme from a deployment's base URL (checked by
// config.CheckBaseURL, whose errors never repeat the URL); the path is the attempt role's
// business (extproc/provider).
func parseBaseURL(raw string) (upstream, error) {
	if err := config.CheckBaseURL(raw); err != nil {
		return upstream{}, fmt.Errorf("base URL: %w", err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return upstream{}, fmt.Errorf("base URL: %w", err)
	}
	up := upstream{host: u.Hostname(), port: 80}
	if u.Scheme == "https" {
		up.tls, up.port = true, 443
	}
	if p := u.Port(); p != "" {
		if up.port, err = parsePort(p); err != nil {
			return upstream{}, fmt.Errorf("base URL: %w", err)
		}
	}
	return up, nil
}

func parsePort(s string) (uint32, error) {
	p, err := strconv.ParseUint(s, 10, 16)
	if err != nil || p == 0 {
		return 0, fmt.Errorf("port %q: want 1-65535", s)
	}
	return uint32(p), nil
}

func isIP(host string) bool { return net.ParseIP(host) != nil }

// buildCluster is deployment d's cluster sy-dep-<id>: the provider at priority 0, the
// trampoline at priority 1 (docs/design.md item 3), the attempt-role ext_proc as upstream HTTP
// filter. It is envoy/static-clusters.yaml.tmpl's deployment cluster plus DNS and TLS.
func buildCluster(d *config.Deployment, o Options) (*clusterv3.Cluster, error) {
	up, err := parseBaseURL(d.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("deployment %q: %w", d.ID, err)
	}
	tHost, tPort, _ := splitPort(o.Trampoline) // checked by withDefaults
	name := contract.ClusterName(d.ID)
	c := &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: discoveryType(up.host, tHost)},
		ConnectTimeout:       durationpb.New(o.ConnectTimeout),
		CircuitBreakers:      liftedCircuitBreakers(),
		// The attempt role buffers the request body (BUFFERED) on the upstream side: sized
		// from switchyard's one body limit, as the route's request_body_buffer_limit is.
		PerConnectionBufferLimitBytes: wrapperspb.UInt32(clampUint32(o.RequestBodyBufferLimit)),
		TypedExtensionProtocolOptions: map[string]*anypb.Any{httpProtocolOptionsKey: mustAny(attemptProtocolOptions(o))},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{
				{Priority: 0, LbEndpoints: []*endpointv3.LbEndpoint{
					lbEndpoint(up.host, up.port, map[string]*structpb.Struct{
						transportSocketMatchNS: label("provider"),
					}),
				}},
				{Priority: 1, LbEndpoints: []*endpointv3.LbEndpoint{
					lbEndpoint(tHost, tPort, map[string]*structpb.Struct{
						transportSocketMatchNS:     label("trampoline"),
						contract.MetadataNamespace: {Fields: map[string]*structpb.Value{contract.MetadataTrampoline: structpb.NewBoolValue(true)}},
					}),
				}},
			},
		},
	}
	if c.GetType() != clusterv3.Cluster_STATIC {
		// Providers publish A and AAAA records; many container networks have no IPv6
		// route, so prefer IPv4 and fall back (Envoy's default AUTO prefers IPv6).
		c.DnsLookupFamily = clusterv3.Cluster_V4_PREFERRED
	}
	if up.tls {
		c.TransportSocketMatches = tlsMatches(up, o)
	}
	return c, nil
}

// clampUint32 is n, or the largest uint32 for a larger n.
func clampUint32(n uint64) uint32 { return uint32(min(n, math.MaxUint32)) }

// liftedCircuitBreakers lifts Envoy's per-cluster circuit breakers (the DEFAULT priority's
// thresholds, api/envoy/config/cluster/v3/circuit_breaker.proto): by default 1,024
// connections, pending requests and requests, and 3 retries. switchyard's own admission
// (circuits, in-flight counts, budgets) governs the providers, and Envoy's overload manager
// protects Envoy; Envoy's defaults would only refuse requests that switchyard admitted
// (past max_connections an HTTP/1 request first waits in the pending queue):
//   - a request holds its cluster's request (and an ext_proc stream, its ext_proc cluster's)
//     for its whole life, and an LLM stream lasts minutes: past 1,024 the pool fails the next
//     with Overflow (ConnPoolImplBase::attachStreamToClient, source/common/conn_pool/
//     conn_pool_base.cc), a 503 the router never retries, so it never fails over;
//   - every retry on a deployment cluster goes to the trampoline, at most one per attempt,
//     and past max_retries RetryStateImpl::shouldRetry answers NoOverflow
//     (source/common/router/retry_state_impl.cc): the client gets the connect failure's 503.
//
// Istio's defaults for all four are the same 2^32-1.
func liftedCircuitBreakers() *clusterv3.CircuitBreakers {
	return &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
		Priority:           corev3.RoutingPriority_DEFAULT,
		MaxConnections:     wrapperspb.UInt32(math.MaxUint32),
		MaxPendingRequests: wrapperspb.UInt32(math.MaxUint32),
		MaxRequests:        wrapperspb.UInt32(math.MaxUint32),
		MaxRetries:         wrapperspb.UInt32(math.MaxUint32),
	}}}
}

// discoveryType is STATIC when every endpoint is an IP literal, else STRICT_DNS. Not
// LOGICAL_DNS: it takes exactly one endpoint ("LOGICAL_DNS clusters must have a single
// locality_lb_endpoint and a single lb_endpoint", source/extensions/clusters/logical_dns/
// logical_dns_cluster.cc LogicalDnsClusterFactory), and the cluster needs two priorities.
// STRICT_DNS resolves every endpoint asynchronously, keeps a host per address and
// re-resolves every dns_refresh_rate (strict_dns_cluster.cc), which for a provider behind
// a CDN means connections spread over its addresses.
func discoveryType(hosts ...string) clusterv3.Cluster_DiscoveryType {
	for _, h := range hosts {
		if !isIP(h) {
			return clusterv3.Cluster_STRICT_DNS
		}
	}
	return clusterv3.Cluster_STATIC
}

func label(v string) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{endpointLabel: structpb.NewStringValue(v)}}
}

func lbEndpoint(host string, port uint32, md map[string]*structpb.Struct) *endpointv3.LbEndpoint {
	return &endpointv3.LbEndpoint{
		HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: socketAddress(host, port),
		}},
		Metadata: &corev3.Metadata{FilterMetadata: md},
	}
}

func socketAddress(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       host,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

// tlsMatches puts TLS on the provider endpoint and plaintext on the trampoline endpoint
// (switchyard's own plain-HTTP listener): Envoy picks the first match whose labels are a
// subset of the endpoint's envoy.transport_socket_match metadata
// (source/common/upstream/transport_socket_match_impl.cc TransportSocketMatcherImpl::resolve).
func tlsMatches(up upstream, o Options) []*clusterv3.Cluster_TransportSocketMatch {
	tlsCtx, raw := mustAny(upstreamTLS(up, o)), mustAny(&rawbufferv3.RawBuffer{})
	return []*clusterv3.Cluster_TransportSocketMatch{
		{Name: "provider", Match: label("provider"), TransportSocket: &corev3.TransportSocket{
			Name: tlsSocketName, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: tlsCtx}}},
		{Name: "trampoline", Match: label("trampoline"), TransportSocket: &corev3.TransportSocket{
			Name: rawBufferSocketName, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: raw}}},
	}
}

// upstreamTLS sends the host as SNI (never an IP literal, RFC 6066 §3) and verifies the
// provider's certificate: Envoy verifies nothing without a validation context, and checks
// the name only through match_typed_subject_alt_names (UpstreamTlsContext docs;
// source/common/tls/cert_validator/default_validator.cc). A provider key must never go to
// an unverified peer. TLS 1.3 is allowed: Envoy's client default stops at 1.2
// (TlsParameters.tls_maximum_protocol_version).
func upstreamTLS(up upstream, o Options) *tlsv3.UpstreamTlsContext {
	san := &tlsv3.SubjectAltNameMatcher{
		SanType: tlsv3.SubjectAltNameMatcher_DNS,
		Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: up.host}},
	}
	sni := up.host
	if isIP(up.host) {
		san.SanType, sni = tlsv3.SubjectAltNameMatcher_IP_ADDRESS, ""
	}
	return &tlsv3.UpstreamTlsContext{
		Sni: sni,
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsParams: &tlsv3.TlsParameters{TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3},
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa:                 &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: o.UpstreamCAFile}},
				MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{san},
			}},
		},
	}
}

// attemptProtocolOptions is the cluster's HTTP/1.1 upstream with the attempt-role ext_proc
// then upstream_codec (the terminal upstream filter), as in envoy/static-clusters.yaml.tmpl.
func attemptProtocolOptions(o Options) *httpv3.HttpProtocolOptions {
	return &httpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: extProcFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(attemptExtProc(o))}},
			{Name: upstreamCodecName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&codecv3.UpstreamCodec{})}},
		},
	}
}

// attemptExtProc is the attempt role's filter (docs/design.md item 2).
func attemptExtProc(o Options) *extprocv3.ExternalProcessor {
	ns := &extprocv3.MetadataOptions_MetadataNamespaces{Untyped: []string{contract.MetadataNamespace}}
	return &extprocv3.ExternalProcessor{
		GrpcService: &corev3.GrpcService{
			TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: o.ExtProcCluster}},
			InitialMetadata: []*corev3.HeaderValue{{Key: contract.HeaderRole, Value: contract.RoleAttempt}},
		},
		// Envoy ignores every local reply of an upstream ext_proc, its own error replies
		// included (ext_proc.cc Filter::sendImmediateResponse): fail-open lets a request
		// continue (its credentials were removed by the route role) instead of hanging.
		FailureModeAllow: true,
		ProcessingMode: &extprocv3.ProcessingMode{
			RequestHeaderMode:   extprocv3.ProcessingMode_SEND,
			RequestBodyMode:     extprocv3.ProcessingMode_BUFFERED,
			ResponseHeaderMode:  extprocv3.ProcessingMode_SEND,
			ResponseBodyMode:    extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED,
			ResponseTrailerMode: extprocv3.ProcessingMode_SEND,
		},
		// The state and the sent mark come as attributes, once per stream, not as forwarded
		// metadata, which Envoy would send with every body chunk (contract.AttributeState).
		RequestAttributes: []string{contract.AttributeClusterName, contract.AttributeTrampoline, contract.AttributeState, contract.AttributeSent},
		MutationRules:     &mutationv3.HeaderMutationRules{AllowAllRouting: wrapperspb.Bool(true)},
		MetadataOptions:   &extprocv3.MetadataOptions{ReceivingNamespaces: ns},
		MessageTimeout:    durationpb.New(o.AttemptMessageTimeout),
	}
}

// mustAny packs a message built here; only an unregistered type fails, a programming error.
func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(fmt.Sprintf("xds: packing %T: %v", m, err))
	}
	return a
}
