// Package upstreamtls owns envoysim's upstream transport sockets: picking the
// transport socket for an endpoint the way Envoy's cluster transport_socket_matches
// do, and turning an envoy.transport_sockets.tls UpstreamTlsContext into a
// crypto/tls client configuration that verifies servers by Envoy's rules, not Go's.
//
// Sources imitated (never copied):
//   - Cluster.transport_socket_matches in envoy/config/cluster/v3/cluster.proto and
//     source/common/upstream/transport_socket_match_impl.cc (endpoint metadata first,
//     then locality metadata, then the cluster's transport_socket);
//   - UpstreamTlsContext and CommonTlsContext in
//     envoy/extensions/transport_sockets/tls/v3/tls.proto, CertificateValidationContext
//     and TlsParameters in .../tls/v3/common.proto;
//   - source/common/tls/context_config_impl.cc (client defaults: TLS 1.2 only, Envoy's
//     cipher and curve lists) and source/common/tls/cert_validator/default_validator.cc
//     (what is verified, and which configurations are rejected).
//
// Every field this package does not implement is rejected with an error naming it
// (see ErrUnsupported), so a config that would make Envoy behave differently never
// passes silently.
package upstreamtls

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// TransportSocketMatchKey is the filter_metadata namespace Envoy reads on endpoints
// and localities to pick a transport socket.
const TransportSocketMatchKey = "envoy.transport_socket_match"

// Select picks the transport socket for an endpoint following Cluster.transport_socket_matches
// (first match whose `match` is a subset of the endpoint's metadata filter_metadata["envoy.transport_socket_match"]; a match with empty `match` matches all), else cluster.transport_socket; nil = plaintext.
func Select(cluster *clusterv3.Cluster, endpointMetadata *corev3.Metadata) *corev3.TransportSocket {
	return SelectWithLocality(cluster, endpointMetadata, nil)
}

// SelectWithLocality is Select with Envoy's second pass: when no match fits the
// endpoint's metadata, the matches are tried again against the metadata of the
// endpoint's LocalityLbEndpoints, before falling back to cluster.transport_socket.
//
// Cluster.transport_socket_matcher (the generic matcher API) is not modelled here;
// ValidateCluster rejects clusters that set it.
func SelectWithLocality(cluster *clusterv3.Cluster, endpointMetadata, localityMetadata *corev3.Metadata) *corev3.TransportSocket {
	for _, md := range []*corev3.Metadata{endpointMetadata, localityMetadata} {
		for _, m := range cluster.GetTransportSocketMatches() {
			if labelsMatch(m.GetMatch(), md) {
				return m.GetTransportSocket()
			}
		}
	}
	return cluster.GetTransportSocket()
}

// labelsMatch reports whether every key of match is present with an equal value in
// md's envoy.transport_socket_match struct (Config::Metadata::metadataLabelMatch with
// list_as_any=false). An empty match matches anything, even missing metadata.
func labelsMatch(match *structpb.Struct, md *corev3.Metadata) bool {
	labels := match.GetFields()
	if len(labels) == 0 {
		return true
	}
	fields := md.GetFilterMetadata()[TransportSocketMatchKey].GetFields()
	for k, want := range labels {
		got, ok := fields[k]
		if !ok || !proto.Equal(got, want) {
			return false
		}
	}
	return true
}

// ValidateCluster checks the transport-socket part of a cluster the way Envoy does
// when it accepts a CDS update: every socket in transport_socket_matches and the
// cluster's transport_socket must build. An error means Envoy-faithful envoysim
// would reject (NACK) the cluster. Sockets that need the upstream host name
// (auto_host_sni) are checked without it.
func ValidateCluster(cluster *clusterv3.Cluster) error {
	if cluster.GetTransportSocketMatcher() != nil {
		return fmt.Errorf("cluster %q: transport_socket_matcher: %w", cluster.GetName(), ErrUnsupported)
	}
	for i, m := range cluster.GetTransportSocketMatches() {
		if m.GetTransportSocket() == nil {
			// Envoy looks the factory up by the (empty) name and fails.
			return fmt.Errorf("cluster %q: transport_socket_matches[%d] (%q): transport_socket is required",
				cluster.GetName(), i, m.GetName())
		}
		if _, err := parseSocket(m.GetTransportSocket()); err != nil {
			return fmt.Errorf("cluster %q: transport_socket_matches[%d] (%q): %w", cluster.GetName(), i, m.GetName(), err)
		}
	}
	if _, err := parseSocket(cluster.GetTransportSocket()); err != nil {
		return fmt.Errorf("cluster %q: transport_socket: %w", cluster.GetName(), err)
	}
	return nil
}
