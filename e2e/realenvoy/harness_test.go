// Package realenvoy_test runs scenarios of e2e/gateway against a real Envoy
// (envoyproxy/envoy, started with testcontainers-go) instead of envoysim: the proof that
// the re-entry design (docs/design.md) holds in Envoy itself. switchyard (ext_proc, trampoline,
// xDS) and the fake providers run in the test process on loopback; the container reaches
// them through testcontainers' host port access (HostInternal). The real-Envoy test is
// built only with the realenvoy tag (`make test-realenvoy`), which needs a Docker engine;
// without the tag the same scenarios run on envoysim.
package realenvoy_test

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/testcontainers/testcontainers-go"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim"
	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/internal/replica"
	"github.com/switchyard-gw/switchyard/internal/testlog"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
	"github.com/switchyard-gw/switchyard/xds"
)

// waitFor bounds every request; it is a safety net, never a sleep.
const waitFor = 60 * time.Second

// bootstrapPath is the shipped bootstrap the container runs (with switchyard's addresses).
const bootstrapPath = "../../envoy/envoy.yaml"

func providerKey(id string) string { return "sk-provider-" + id }

// fixture is switchyard in-process, its fakes and a real Envoy in front.
type fixture struct {
	base  string
	fakes map[string]*fakeprovider.Server
	logs  *testlog.Buffer
}

// deployment of the fixture; Down means nothing listens at its address.
type deployment struct {
	ID, Model string
	Price     float64
	Down      bool
}

// listen opens a loopback listener and returns it with its port.
func listen(t *testing.T) (net.Listener, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln, ln.Addr().(*net.TCPAddr).Port
}

// deadPort is a port nothing listens on, here or (never forwarded) in the container.
func deadPort(t *testing.T) int {
	t.Helper()
	ln, p := listen(t)
	_ = ln.Close()
	return p
}

// inContainer is how the Envoy container reaches a port of this process.
func inContainer(port int) string { return hostPort(testcontainers.HostInternal, port) }

func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// proxy is the Envoy in front of switchyard: the real one in a container, or envoysim.
type proxy interface {
	// host is how the proxy reaches this process.
	host() string
	// start runs the proxy on bootstrap (JSON) with forwarded the ports it may reach, and
	// returns the base URL of its ingress listener once it holds the route and clusters.
	start(t *testing.T, bootstrap []byte, forwarded []int, clusters []string, log *slog.Logger) string
}

// envoySim runs the same bootstrap in envoysim on loopback: the suite's own assertions are
// exercised where Docker is absent (e2e/gateway is the envoysim suite proper).
type envoySim struct{}

func (envoySim) host() string { return "127.0.0.1" }

func (envoySim) start(t *testing.T, bootstrap []byte, _ []int, clusters []string, log *slog.Logger) string {
	t.Helper()
	bs, err := sim.Load(bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(bs, sim.WithListenerAddress("ingress", "127.0.0.1:0"), sim.WithLogger(log.With("component", "envoysim")))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); s.Close() })
	wctx, wcancel := context.WithTimeout(ctx, waitFor)
	defer wcancel()
	if err := s.WaitForRouteConfigs(wctx, xds.DefaultRouteConfigName); err != nil {
		t.Fatal(err)
	}
	// The route can arrive before the deployments' clusters; a request then meets
	// cluster_not_found.
	if err := s.WaitForClusters(wctx, clusters...); err != nil {
		t.Fatal(err)
	}
	return "http://" + s.Addr("ingress")
}

// startFixture starts the fakes, switchyard's servers and the proxy in front.
func startFixture(t *testing.T, px proxy, deps []deployment) *fixture {
	t.Helper()
	f := &fixture{fakes: map[string]*fakeprovider.Server{}, logs: &testlog.Buffer{}}
	log := slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var forwarded []int
	strategy := "price-based"
	cfg := &configv1.Config{RouterSettings: &configv1.RouterSettings{RoutingStrategy: &strategy}}
	secrets := map[string]string{}
	for _, d := range deps {
		fake, err := fakeprovider.New(fakeprovider.Options{Kind: fakeprovider.OpenAI, Name: d.ID, APIKey: providerKey(d.ID)})
		if err != nil {
			t.Fatal(err)
		}
		f.fakes[d.ID] = fake
		port := deadPort(t)
		if !d.Down {
			ln, p := listen(t)
			srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: fake}}
			srv.Start()
			t.Cleanup(func() { fake.Close(); srv.Close() })
			port = p
			forwarded = append(forwarded, p)
		}
		price := d.Price
		cfg.Deployments = append(cfg.Deployments, &configv1.Deployment{
			Id: d.ID, PublicModel: d.Model, Provider: "openai", ProviderModel: d.Model,
			BaseUrl: "http://" + hostPort(px.host(), port),
			Price:   &configv1.Price{InputPerMillion: &price, OutputPerMillion: &price},
		})
		secrets[d.ID] = providerKey(d.ID)
	}
	v, err := config.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Config(cfg); err != nil {
		t.Fatal(err)
	}
	snap, err := config.Compile(1, cfg, secrets)
	if err != nil {
		t.Fatal(err)
	}
	live := config.NewLive(snap)
	key := make([]byte, attemptstate.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	// switchyard as the binary assembles it; the proxy reaches the trampoline through host.
	extLn, extPort := listen(t)
	trampLn, trampPort := listen(t)
	xdsLn, xdsPort := listen(t)
	r, err := replica.New(replica.Config{Router: routing.New(live, memstore.New(), routing.Options{Logger: log}), Live: live,
		Keys: attemptstate.Keys{Current: key}, Logger: log, Listeners: replica.Listeners{ExtProc: extLn, Trampoline: trampLn, XDS: xdsLn},
		TrampolineAdvertise: hostPort(px.host(), trampPort)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 3)
	r.Serve(ctx, errc)
	t.Cleanup(func() {
		r.Stop(2 * time.Second)
		cancel()
	})
	forwarded = append(forwarded, extPort, trampPort, xdsPort)

	t.Cleanup(func() {
		if t.Failed() {
			t.Log(f.logs.String())
		}
	})
	clusters := make([]string, 0, len(deps))
	for _, d := range deps {
		clusters = append(clusters, contract.ClusterName(d.ID))
	}
	f.base = px.start(t, proxyBootstrap(t, px.host(), extPort, xdsPort), forwarded, clusters, log)
	return f
}

// proxyBootstrap is envoy/envoy.yaml with its two static clusters pointed at this process
// (through host, possibly a name: STRICT_DNS, IPv4 only), as JSON (Envoy picks the parser
// by the file's extension).
func proxyBootstrap(t *testing.T, host string, extprocPort, xdsPort int) []byte {
	t.Helper()
	bs, err := sim.LoadFile(bootstrapPath)
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]int{xds.DefaultExtProcCluster: extprocPort, "switchyard_xds": xdsPort}
	for _, c := range bs.GetStaticResources().GetClusters() {
		p, ok := ports[c.GetName()]
		if !ok {
			continue
		}
		delete(ports, c.GetName())
		c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS}
		c.DnsLookupFamily = clusterv3.Cluster_V4_ONLY
		sa := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
		sa.Address = host
		sa.PortSpecifier = &corev3.SocketAddress_PortValue{PortValue: uint32(p)}
	}
	if len(ports) > 0 {
		t.Fatalf("%s lacks the clusters %v", bootstrapPath, ports)
	}
	if err := bs.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	b, err := protojson.Marshal(bs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// post sends a chat completion through Envoy.
func (f *fixture) post(t *testing.T, body string, headers map[string]string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// served returns how many requests each fake received since the last reset.
func (f *fixture) served() map[string]int {
	out := map[string]int{}
	for id, s := range f.fakes {
		if n := len(s.Requests()); n > 0 {
			out[id] = n
		}
	}
	return out
}

func (f *fixture) reset() {
	for _, s := range f.fakes {
		s.Reset()
	}
}

// loadJSON parses a bootstrap as Envoy would, through envoysim's loader (JSON is YAML).
func loadJSON(b []byte) (*bootstrapv3.Bootstrap, error) { return sim.Load(b) }

func inContainerAddr(host string, port uint32) string {
	return net.JoinHostPort(host, strconv.FormatUint(uint64(port), 10))
}
