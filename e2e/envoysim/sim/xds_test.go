package sim_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	epv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	codecv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/upstream_codec/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim"
)

// xdsServer is go-control-plane's ADS server with a snapshot cache; it records NACKs.
type xdsServer struct {
	addr  string
	cache cachev3.SnapshotCache
	nack  chan string
}

func newXDSServer(t *testing.T) *xdsServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	x := &xdsServer{addr: ln.Addr().String(), cache: cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil), nack: make(chan string, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	cb := serverv3.CallbackFuncs{StreamRequestFunc: func(_ int64, r *discoveryv3.DiscoveryRequest) error {
		if r.GetErrorDetail() != nil {
			x.nack <- r.GetErrorDetail().GetMessage()
		}
		return nil
	}}
	gs := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, serverv3.NewServer(ctx, x.cache, cb))
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(func() { cancel(); gs.Stop() })
	return x
}

func (x *xdsServer) set(t *testing.T, version string, res map[resource.Type][]types.Resource) {
	t.Helper()
	snap, err := cachev3.NewSnapshot(version, res)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.cache.SetSnapshot(context.Background(), "envoysim-test", snap); err != nil {
		t.Fatal(err)
	}
}

func adsBootstrap(procAddr, xdsAddr string) string {
	y := cfg{procAddr: procAddr, extraTop: `node: {id: envoysim-test, cluster: test}
dynamic_resources:
  ads_config: {api_type: GRPC, transport_api_version: V3, grpc_services: [{envoy_grpc: {cluster_name: xds}}]}
  cds_config: {ads: {}, resource_api_version: V3}`,
		clusters: []string{clusterYAML("xds", `typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: {"@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, explicit_http_config: {http2_protocol_options: {}}}}`,
			[]string{endpointYAML(xdsAddr, "")})},
	}.yaml()
	// Routes from RDS instead of the static route_config.
	i := strings.Index(y, "route_config:")
	j := strings.Index(y[i:], "\n")
	return y[:i] + `rds: {route_config_name: rc, config_source: {ads: {}, resource_api_version: V3}}` + y[i+j:]
}

func socketAddress(addr string) *corev3.Address {
	host, port, _ := net.SplitHostPort(addr)
	var p uint32
	_, _ = fmt.Sscan(port, &p)
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: p}}}}
}

func lbEndpoint(addr string) *endpointv3.LbEndpoint {
	return &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socketAddress(addr)}}}
}

// Clusters from CDS (an EDS cluster warmed by its assignment and carrying an
// upstream ext_proc filter, and a STATIC one), routes from RDS, over one ADS stream
// to go-control-plane's server; an invalid cluster is NACKed and the previous state kept.
func TestCDSEDSRDSOverADS(t *testing.T) {
	ps := newProcServer(t)
	a := newUpstream(t, nil)
	b := newUpstream(t, nil)
	x := newXDSServer(t)

	procOpts := mustAnyOf(t, &httpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}}}},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: "envoy.filters.http.ext_proc", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAnyOf(t, &epv3.ExternalProcessor{
				GrpcService: &corev3.GrpcService{
					TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "extproc"}},
					InitialMetadata: []*corev3.HeaderValue{{Key: "x-role", Value: "attempt"}},
				},
				ProcessingMode: &epv3.ProcessingMode{RequestHeaderMode: epv3.ProcessingMode_SEND, ResponseHeaderMode: epv3.ProcessingMode_SKIP},
			})}},
			{Name: "envoy.filters.http.upstream_codec", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAnyOf(t, &codecv3.UpstreamCodec{})}},
		},
	})
	eds := &clusterv3.Cluster{
		Name:                 "sy-dep-a",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ResourceApiVersion:    corev3.ApiVersion_V3,
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		}},
		ConnectTimeout:                durationpb.New(time.Second),
		TypedExtensionProtocolOptions: map[string]*anypb.Any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": procOpts},
	}
	static := &clusterv3.Cluster{
		Name:                 "sy-dep-b",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(time.Second),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: "sy-dep-b", Endpoints: []*endpointv3.LocalityLbEndpoints{
			{LbEndpoints: []*endpointv3.LbEndpoint{lbEndpoint(b.addr())}}}},
	}
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: "sy-dep-a", Endpoints: []*endpointv3.LocalityLbEndpoints{
		{LbEndpoints: []*endpointv3.LbEndpoint{lbEndpoint(a.addr())}}}}
	rc := &routev3.RouteConfiguration{Name: "rc", VirtualHosts: []*routev3.VirtualHost{{
		Name: "vh", Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_ClusterHeader{ClusterHeader: "x-cluster"}}},
		}},
	}}}
	x.set(t, "1", map[resource.Type][]types.Resource{
		resource.ClusterType:  {eds, static},
		resource.EndpointType: {cla},
		resource.RouteType:    {rc},
	})

	e := startYAML(t, adsBootstrap(ps.addr, x.addr), sim.WithADSInitialBackoff(10*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := e.s.WaitForClusters(ctx, "sy-dep-a", "sy-dep-b"); err != nil {
		t.Fatal(err)
	}
	if err := e.s.WaitForRouteConfigs(ctx, "rc"); err != nil {
		t.Fatal(err)
	}

	res := e.do("GET", "/a", "", "X-Cluster", "sy-dep-a")
	st := ps.next(t, "attempt")
	st.Recv(t)
	st.Send(t, reqHeadersResp(common(setHeaders("x-from-xds-filter", "1"))))
	mustOK(t, await(t, res), 200)
	if got := a.next(t); got.Header.Get("X-From-Xds-Filter") != "1" {
		t.Fatalf("EDS upstream got %v", got.Header)
	}
	mustOK(t, await(t, e.do("GET", "/b", "", "X-Cluster", "sy-dep-b")), 200)
	b.next(t)

	// An unsupported field in a new cluster NACKs the update; the old clusters stay.
	bad := &clusterv3.Cluster{Name: "sy-dep-c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment: static.LoadAssignment, OutlierDetection: &clusterv3.OutlierDetection{}}
	x.set(t, "2", map[resource.Type][]types.Resource{
		resource.ClusterType:  {eds, static, bad},
		resource.EndpointType: {cla},
		resource.RouteType:    {rc},
	})
	select {
	case msg := <-x.nack:
		if !strings.Contains(msg, "outlier_detection is not supported") {
			t.Fatalf("NACK %q", msg)
		}
	case <-time.After(wait):
		t.Fatal("no NACK")
	}
	mustOK(t, await(t, e.do("GET", "/b", "", "X-Cluster", "sy-dep-b")), 200)
	b.next(t)
	mustOK(t, await(t, e.do("GET", "/c", "", "X-Cluster", "sy-dep-c")), 503)
}

func mustAnyOf(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
