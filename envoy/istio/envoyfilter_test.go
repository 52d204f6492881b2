// Package istio_test keeps the Istio example (switchyard-ingress.yaml) true to what
// switchyard publishes: every patch value parses strictly into its Envoy type, and the
// filter, route fields and cluster are exactly envoy/envoy.yaml's route-role filter and
// xds.Build's route and cluster for the same deployment and addresses.
package istio_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/xds"
)

// The addresses the example assumes (its header comment).
const (
	extProcCluster = "outbound|9002||switchyard.switchyard.svc.cluster.local"
	trampoline     = "switchyard.switchyard.svc.cluster.local:9003"
	maxRedirects   = 10
)

type configPatch struct {
	ApplyTo string `yaml:"applyTo"`
	Patch   struct {
		Operation string         `yaml:"operation"`
		Value     map[string]any `yaml:"value"`
	} `yaml:"patch"`
}

// patches reads the EnvoyFilter's patches, each value parsed strictly into the Envoy type
// its applyTo names; added and inserted values must also pass Envoy's validation.
func patches(t *testing.T) map[string][]proto.Message {
	t.Helper()
	f, err := os.Open("switchyard-ingress.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	out := map[string][]proto.Message{}
	for {
		var doc struct {
			Kind string `yaml:"kind"`
			Spec struct {
				ConfigPatches []configPatch `yaml:"configPatches"`
			} `yaml:"spec"`
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if doc.Kind != "EnvoyFilter" {
			continue
		}
		for i, p := range doc.Spec.ConfigPatches {
			var m proto.Message
			switch p.ApplyTo {
			case "HTTP_FILTER":
				m = &hcmv3.HttpFilter{}
			case "NETWORK_FILTER":
				m = &listenerv3.Filter{}
			case "VIRTUAL_HOST":
				m = &routev3.VirtualHost{}
			case "HTTP_ROUTE":
				m = &routev3.Route{}
			case "CLUSTER":
				m = &clusterv3.Cluster{}
			default:
				t.Fatalf("patch %d: applyTo %s has no check here", i, p.ApplyTo)
			}
			js, err := json.Marshal(p.Patch.Value)
			if err != nil {
				t.Fatal(err)
			}
			if err := protojson.Unmarshal(js, m); err != nil {
				t.Fatalf("patch %d (%s): %v", i, p.ApplyTo, err)
			}
			if p.Patch.Operation != "MERGE" {
				if err := m.(interface{ ValidateAll() error }).ValidateAll(); err != nil {
					t.Fatalf("patch %d (%s): %v", i, p.ApplyTo, err)
				}
			}
			out[p.ApplyTo] = append(out[p.ApplyTo], m)
		}
	}
	return out
}

func one[T proto.Message](t *testing.T, ps map[string][]proto.Message, applyTo string) T {
	t.Helper()
	if len(ps[applyTo]) != 1 {
		t.Fatalf("%d %s patches, want 1", len(ps[applyTo]), applyTo)
	}
	return ps[applyTo][0].(T)
}

func published(t *testing.T) (*clusterv3.Cluster, *routev3.Route) {
	t.Helper()
	cfg := &configv1.Config{Deployments: []*configv1.Deployment{{Id: "openai-main", PublicModel: "gpt-4o",
		Provider: "openai", BaseUrl: "https://api.openai.com", ProviderModel: "gpt-4o"}}}
	v, err := config.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Config(cfg); err != nil {
		t.Fatal(err)
	}
	snap, err := config.Compile(1, cfg, map[string]string{"openai-main": "sk-x"})
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := xds.Build(snap, xds.Options{ExtProcCluster: extProcCluster, Trampoline: trampoline, MaxInternalRedirects: maxRedirects})
	if err != nil {
		t.Fatal(err)
	}
	c := s.GetResources(resource.ClusterType)["sy-dep-openai-main"]
	rc := s.GetResources(resource.RouteType)[xds.DefaultRouteConfigName]
	if c == nil || rc == nil {
		t.Fatal("nothing published")
	}
	return c.(*clusterv3.Cluster), rc.(*routev3.RouteConfiguration).GetVirtualHosts()[0].GetRoutes()[0]
}

func TestEnvoyFilterIsWhatSwitchyardPublishes(t *testing.T) {
	ps := patches(t)
	wantCluster, wantRoute := published(t)

	if got := one[*clusterv3.Cluster](t, ps, "CLUSTER"); !proto.Equal(wantCluster, got) {
		t.Errorf("the deployment cluster differs from xds.Build's:\n got %s\nwant %s", mustJSON(t, got), mustJSON(t, wantCluster))
	}
	route := one[*routev3.Route](t, ps, "HTTP_ROUTE")
	if !proto.Equal(wantRoute.GetRoute(), route.GetRoute()) {
		t.Errorf("the route action differs from switchyard's:\n got %s\nwant %s", mustJSON(t, route.GetRoute()), mustJSON(t, wantRoute.GetRoute()))
	}
	if !proto.Equal(wantRoute.GetRequestBodyBufferLimit(), route.GetRequestBodyBufferLimit()) {
		t.Errorf("request_body_buffer_limit %v, published %v", route.GetRequestBodyBufferLimit(), wantRoute.GetRequestBodyBufferLimit())
	}
	if !one[*routev3.VirtualHost](t, ps, "VIRTUAL_HOST").GetIncludeRequestAttemptCount() {
		t.Error("the virtual host patch does not set include_request_attempt_count")
	}

	// The route-role filter is envoy/envoy.yaml's, with the mesh's cluster for switchyard.
	bs, err := sim.LoadFile("../envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var shippedHCM hcmv3.HttpConnectionManager
	if err := bs.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&shippedHCM); err != nil {
		t.Fatal(err)
	}
	wantFilter := proto.Clone(shippedHCM.GetHttpFilters()[0]).(*hcmv3.HttpFilter)
	gotFilter := one[*hcmv3.HttpFilter](t, ps, "HTTP_FILTER")
	// Compare with the cluster names aligned; the names themselves are checked below.
	got := bytes.ReplaceAll(mustJSON(t, gotFilter), []byte(extProcCluster), []byte(xds.DefaultExtProcCluster))
	if want := mustJSON(t, wantFilter); !bytes.Equal(got, want) {
		t.Errorf("route-role filter differs from envoy/envoy.yaml's:\n got %s\nwant %s", got, want)
	}
	if !bytes.Contains(mustJSON(t, gotFilter), []byte(extProcCluster)) {
		t.Errorf("the route role does not call %s", extProcCluster)
	}

	var hcm hcmv3.HttpConnectionManager
	if err := one[*listenerv3.Filter](t, ps, "NETWORK_FILTER").GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(hcm.GetStreamIdleTimeout(), shippedHCM.GetStreamIdleTimeout()) {
		t.Errorf("stream_idle_timeout %v, envoy.yaml has %v", hcm.GetStreamIdleTimeout(), shippedHCM.GetStreamIdleTimeout())
	}
	if !proto.Equal(hcm.GetLocalReplyConfig(), shippedHCM.GetLocalReplyConfig()) || shippedHCM.GetLocalReplyConfig() == nil {
		t.Errorf("local_reply_config differs from envoy.yaml's")
	}
}

func mustJSON(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	// protojson output is not byte-stable; re-encode through encoding/json for a canonical form.
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
