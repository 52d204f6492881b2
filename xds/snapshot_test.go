package xds

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/config"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// compile validates and compiles deployments into a snapshot of version v.
func compile(t *testing.T, v uint64, deps ...*configv1.Deployment) *config.Snapshot {
	t.Helper()
	cfg := &configv1.Config{Deployments: deps}
	val, err := config.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	if err := val.Config(cfg); err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{}
	for _, d := range deps {
		secrets[d.GetId()] = "sk-" + d.GetId()
	}
	snap, err := config.Compile(v, cfg, secrets)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func dep(id, provider, baseURL string) *configv1.Deployment {
	d := &configv1.Deployment{Id: id, PublicModel: "gpt-4o", Provider: provider, BaseUrl: baseURL, ProviderModel: "gpt-4o"}
	if provider == "azure-openai" {
		d.ApiVersion = "2024-10-21"
	}
	return d
}

// goldenJSON renders a snapshot's resources of one type as indented protojson, in order.
func goldenJSON(t *testing.T, s *cache.Snapshot, typ resource.Type) []byte {
	t.Helper()
	names := sortedKeys(s.GetResources(typ))
	var buf bytes.Buffer
	buf.WriteString("[\n")
	for i, n := range names {
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(s.GetResources(typ)[n].(proto.Message))
		if err != nil {
			t.Fatal(err)
		}
		// protojson output is deliberately unstable in whitespace: normalise through
		// encoding/json so the golden files stay byte-stable.
		var out bytes.Buffer
		if err := json.Indent(&out, compact(t, b), "", "  "); err != nil {
			t.Fatal(err)
		}
		buf.Write(out.Bytes())
		if i < len(names)-1 {
			buf.WriteString(",")
		}
		buf.WriteString("\n")
	}
	buf.WriteString("]\n")
	return buf.Bytes()
}

func compact(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func sortedKeys(m map[string]types.Resource) []string {
	return slices.Sorted(maps.Keys(m))
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./xds -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the built resources (go test ./xds -update rewrites it):\n%s", path, got)
	}
}

// The resources published for a configuration: TLS + SNI + STRICT_DNS for an https
// provider, plaintext STATIC for an IP-literal http fake, a disabled deployment still
// published, the route with switchyard's redirect budget; checked against goldens.
func TestBuildGolden(t *testing.T) {
	disabled := dep("off", "openai", "https://api.openai.com/v1")
	no := false
	disabled.Enabled = &no
	snap := compile(t, 42,
		dep("oai", "openai", "https://api.openai.com/v1"),
		dep("az", "azure-openai", "https://example.openai.azure.com:8443/openai"),
		dep("local", "openai", "http://127.0.0.1:8000/v1"),
		dep("ip-tls", "openai", "https://10.0.0.7/v1"),
		disabled,
	)
	s, omitted, err := Build(snap, Options{
		Trampoline:             "127.0.0.1:9003",
		MaxInternalRedirects:   12,
		ConnectTimeout:         2 * time.Second,
		RequestBodyBufferLimit: 64 << 20,
		AttemptMessageTimeout:  3 * time.Second,
	})
	if err != nil || omitted != nil {
		t.Fatal(err, omitted)
	}
	if v := s.GetVersion(resource.ClusterType); v != "42" {
		t.Errorf("cluster version %q, want the configuration version 42", v)
	}
	if v := s.GetVersion(resource.RouteType); v != "42" {
		t.Errorf("route version %q, want 42", v)
	}
	consistentWithBootstrap(t, s, "../envoy/envoy.yaml")
	for _, typ := range []resource.Type{resource.ClusterType, resource.RouteType} {
		for n, r := range s.GetResources(typ) {
			if err := r.(interface{ ValidateAll() error }).ValidateAll(); err != nil {
				t.Errorf("%s: %v", n, err)
			}
		}
	}
	cs := s.GetResources(resource.ClusterType)
	if len(cs) != 5 {
		t.Fatalf("clusters %v, want one per deployment", sortedKeys(cs))
	}
	if _, ok := cs["sy-dep-off"]; !ok {
		t.Error("the disabled deployment's cluster is not published")
	}
	// The choices the goldens encode, spelled out.
	if got := cs["sy-dep-oai"].(*clusterv3.Cluster).GetType(); got != clusterv3.Cluster_STRICT_DNS {
		t.Errorf("api.openai.com cluster type %v", got)
	}
	if got := cs["sy-dep-local"].(*clusterv3.Cluster); got.GetType() != clusterv3.Cluster_STATIC || got.GetTransportSocketMatches() != nil {
		t.Errorf("local http cluster: type %v, transport sockets %v", got.GetType(), got.GetTransportSocketMatches())
	}
	checkGolden(t, "clusters.golden", goldenJSON(t, s, resource.ClusterType))
	checkGolden(t, "routes.golden", goldenJSON(t, s, resource.RouteType))
}

func TestBuildDefaultsAndErrors(t *testing.T) {
	snap := compile(t, 1, dep("a", "openai", "http://fake.internal:8080/v1"))
	s, _, err := Build(snap, Options{Trampoline: "switchyard:9003"})
	if err != nil {
		t.Fatal(err)
	}
	rc := s.GetResources(resource.RouteType)[DefaultRouteConfigName]
	if rc == nil {
		t.Fatalf("no route configuration %q", DefaultRouteConfigName)
	}
	c := s.GetResources(resource.ClusterType)["sy-dep-a"].(*clusterv3.Cluster)
	if c.GetType() != clusterv3.Cluster_STRICT_DNS || c.GetConnectTimeout().AsDuration() != DefaultConnectTimeout {
		t.Errorf("cluster %v", c)
	}
	js, _ := protojson.Marshal(c)
	if !strings.Contains(string(js), `"clusterName":"switchyard_extproc"`) {
		t.Errorf("attempt role not on switchyard_extproc: %s", js)
	}

	for _, tramp := range []string{"", "no-port", "host:0", "host:http"} {
		if _, _, err := Build(snap, Options{Trampoline: tramp}); err == nil {
			t.Errorf("trampoline %q accepted", tramp)
		}
	}
	if _, _, err := Build(nil, Options{Trampoline: "h:1"}); err == nil {
		t.Error("nil snapshot accepted")
	}
}

// consistentWithBootstrap checks cache.Snapshot.Consistent on the published resources plus
// the bootstrap's static listeners: the route name the HCM asks for over RDS is exactly the
// one published, and nothing else is.
func consistentWithBootstrap(t *testing.T, s *cache.Snapshot, path string) {
	t.Helper()
	bs, err := sim.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	res := map[resource.Type][]types.Resource{}
	for _, typ := range []resource.Type{resource.ClusterType, resource.RouteType} {
		for _, n := range sortedKeys(s.GetResources(typ)) {
			res[typ] = append(res[typ], s.GetResources(typ)[n])
		}
	}
	for _, l := range bs.GetStaticResources().GetListeners() {
		res[resource.ListenerType] = append(res[resource.ListenerType], l)
	}
	full, err := cache.NewSnapshot(s.GetVersion(resource.ClusterType), res)
	if err != nil {
		t.Fatal(err)
	}
	if err := full.Consistent(); err != nil {
		t.Fatalf("published resources with %s's listeners: %v", path, err)
	}
}
