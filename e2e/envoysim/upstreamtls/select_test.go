package upstreamtls

import (
	"errors"
	"strings"
	"testing"

	xdsmatcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

func matchMetadata(t *testing.T, fields map[string]any) *corev3.Metadata {
	t.Helper()
	s, err := structpb.NewStruct(fields)
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{TransportSocketMatchKey: s}}
}

func mustStruct(t *testing.T, fields map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(fields)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSelect proves transport_socket_matches: first match whose labels are all in
// the endpoint's envoy.transport_socket_match metadata, then the same against the
// locality's metadata, then the cluster's transport_socket (nil = plaintext).
func TestSelect(t *testing.T) {
	tlsTS := tlsSocket(t, &tlsv3.UpstreamTlsContext{Sni: "api.example.test"})
	mtlsTS := tlsSocket(t, &tlsv3.UpstreamTlsContext{Sni: "mtls.example.test"})
	cluster := &clusterv3.Cluster{
		Name: "provider",
		TransportSocketMatches: []*clusterv3.Cluster_TransportSocketMatch{
			{Name: "mtls", Match: mustStruct(t, map[string]any{"tls": true, "mtls": "yes"}), TransportSocket: mtlsTS},
			{Name: "tls", Match: mustStruct(t, map[string]any{"tls": true}), TransportSocket: tlsTS},
		},
	}
	cases := []struct {
		name               string
		endpoint, locality *corev3.Metadata
		want               *corev3.TransportSocket
	}{
		{"tls endpoint", matchMetadata(t, map[string]any{"tls": true}), nil, tlsTS},
		{"subset match, first wins", matchMetadata(t, map[string]any{"tls": true, "mtls": "yes", "zone": "a"}), nil, mtlsTS},
		{"plaintext endpoint", matchMetadata(t, map[string]any{}), nil, nil},
		{"value must be equal", matchMetadata(t, map[string]any{"tls": "true"}), nil, nil},
		{"no metadata", nil, nil, nil},
		{"other namespace ignored", &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
			"envoy.lb": mustStruct(t, map[string]any{"tls": true})}}, nil, nil},
		{"locality fallback", matchMetadata(t, map[string]any{"tls": false}), matchMetadata(t, map[string]any{"tls": true}), tlsTS},
	}
	for _, tc := range cases {
		if got := SelectWithLocality(cluster, tc.endpoint, tc.locality); got != tc.want {
			t.Errorf("%s: SelectWithLocality picked %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := Select(cluster, matchMetadata(t, map[string]any{"tls": true})); got != tlsTS {
		t.Errorf("Select(tls endpoint) = %v, want the tls socket", got)
	}

	// A cluster transport_socket is the fallback; an empty match catches everything
	// before it.
	cluster.TransportSocket = mtlsTS
	if got := Select(cluster, nil); got != mtlsTS {
		t.Errorf("fallback: got %v, want cluster.transport_socket", got)
	}
	raw := &corev3.TransportSocket{Name: rawBufferSocketName}
	cluster.TransportSocketMatches = append(cluster.TransportSocketMatches,
		&clusterv3.Cluster_TransportSocketMatch{Name: "plaintext", TransportSocket: raw})
	if got := Select(cluster, nil); got != raw {
		t.Errorf("empty match: got %v, want the catch-all socket", got)
	}
	if cfg, err := ClientConfig(Select(cluster, nil)); cfg != nil || err != nil {
		t.Errorf("catch-all raw_buffer: ClientConfig = %v, %v; want plaintext", cfg, err)
	}
}

// TestValidateCluster proves a cluster is rejected when any of its sockets would be.
func TestValidateCluster(t *testing.T) {
	good := tlsSocket(t, &tlsv3.UpstreamTlsContext{Sni: "api.example.test"})
	bad := tlsSocket(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{KeyLog: &tlsv3.TlsKeyLog{Path: "/k"}}})
	hostSNI := tlsSocket(t, &tlsv3.UpstreamTlsContext{AutoHostSni: true})

	ok := &clusterv3.Cluster{Name: "c", TransportSocket: hostSNI,
		TransportSocketMatches: []*clusterv3.Cluster_TransportSocketMatch{{Name: "tls", TransportSocket: good}}}
	if err := ValidateCluster(ok); err != nil {
		t.Errorf("valid cluster rejected: %v", err)
	}
	for name, tc := range map[string]struct {
		cluster *clusterv3.Cluster
		want    string
	}{
		"bad match socket": {&clusterv3.Cluster{Name: "c",
			TransportSocketMatches: []*clusterv3.Cluster_TransportSocketMatch{{Name: "tls", TransportSocket: bad}}}, `transport_socket_matches[0] ("tls")`},
		"missing match socket": {&clusterv3.Cluster{Name: "c",
			TransportSocketMatches: []*clusterv3.Cluster_TransportSocketMatch{{Name: "x"}}}, "transport_socket is required"},
		"bad cluster socket": {&clusterv3.Cluster{Name: "c", TransportSocket: bad}, "key_log"},
		"matcher API":        {&clusterv3.Cluster{Name: "c", TransportSocketMatcher: &xdsmatcherv3.Matcher{}}, "transport_socket_matcher"},
	} {
		err := ValidateCluster(tc.cluster)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want mention of %q", name, err, tc.want)
		}
	}
	if err := ValidateCluster(&clusterv3.Cluster{TransportSocketMatcher: &xdsmatcherv3.Matcher{}}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("transport_socket_matcher: %v does not wrap ErrUnsupported", err)
	}
}
