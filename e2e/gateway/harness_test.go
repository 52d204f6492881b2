package gateway_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchyard-gw/switchyard/admin"
	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim"
	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/extproc"
	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/internal/replica"
	"github.com/switchyard-gw/switchyard/internal/testlog"
	"github.com/switchyard-gw/switchyard/internal/testnet"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
)

// These tests run the whole request path on loopback: an official SDK → envoysim (playing
// Envoy from envoy/static-clusters.yaml.tmpl) → switchyard's route role → a deployment
// cluster with switchyard's attempt role → a fake provider (or, for a transport failure,
// switchyard's trampoline) → 307 re-entries until the answer. With gatewayOptions.xds,
// envoysim runs the shipped envoy/envoy.yaml instead and gets the clusters and the route
// over ADS from replica 0 (xdsmode_test.go).

// wait bounds every blocking step; it is a safety net, never a sleep.
const wait = 20 * time.Second

// providerKey is the key switchyard holds for a deployment; clients never see it.
func providerKey(id string) string { return "sk-provider-" + id }

// clientKey is what the SDKs send; providers must never see it.
const clientKey = "sk-client-secret-1234"

// deployment describes one deployment of a test gateway and its fake provider.
type deployment struct {
	ID, Model, ProviderModel string
	Kind                     fakeprovider.Kind
	// Down: nothing listens at the deployment's address (connection refused).
	Down bool
	// WrongKey: switchyard holds a key the fake refuses (401).
	WrongKey bool
	Weight   uint32
	Price    float64
	// ResponseMs / TotalMs lower the deployment's text policies (JSON and stream), IdleMs
	// its stream policy's idle timeout.
	ResponseMs, TotalMs, IdleMs uint64
	// URL, when set, is the provider's base URL instead of a fake's (a hand-written server).
	URL string
	// RPMLimit is the deployment's rpmLimit (0: none).
	RPMLimit uint64
	// Capabilities are the deployment's declared capabilities (nil: none declared).
	Capabilities *configv1.Capabilities
	// Key, when set, is the deployment's API key instead of providerKey(ID).
	Key string
}

// key is the API key switchyard holds for d and its fake expects.
func (d deployment) key() string {
	if d.Key != "" {
		return d.Key
	}
	return providerKey(d.ID)
}

// instance is one switchyard replica as the binary assembles it (internal/replica), with its
// operator endpoints.
type instance struct {
	*replica.Replica
	router *routing.Router
	live   *config.Live
	reg    *prometheus.Registry
	// metricsURL is the replica's operator /metrics (admin.Handler over reg).
	metricsURL string
}

// kill ends the replica as a crash would: every stream and connection at once.
func (r *instance) kill() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.Shutdown(ctx)
}

type gateway struct {
	t        *testing.T
	base     string
	sim      *sim.Sim
	store    store.Store
	replicas []*instance
	fakes    map[string]*fakeprovider.Server
	logs     *testlog.Buffer
}

// gatewayOptions tune a test gateway.
type gatewayOptions struct {
	settings *configv1.RouterSettings
	chains   []*configv1.FallbackChain
	// store shared by every replica; a new memory store when nil.
	store    store.Store
	replicas int
	// replicaStores, when set, gives each replica its own store client (Redis).
	replicaStores []store.Store
	// streamIdleTimeout is the HCM's stream_idle_timeout ("" = the template's default).
	streamIdleTimeout string
	// clientAuth is the route role's client access (the zero value trusts Envoy); with
	// extproc.ClientAuthKeys and no verifier, admin.NewVerifier over the gateway's store.
	clientAuth extproc.ClientAuth
	// xds: envoysim loads the shipped bootstrap (envoy/envoy.yaml) and gets the deployment
	// clusters and the route over ADS from replica 0 instead of the static template.
	xds bool
}

func testKeys(t *testing.T) attemptstate.Keys {
	t.Helper()
	k := make([]byte, attemptstate.KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return attemptstate.Keys{Current: k}
}

// startGateway starts fakes for deps, switchyard replicas and envoysim in front of them.
func startGateway(t *testing.T, deps []deployment, o gatewayOptions) *gateway {
	t.Helper()
	g := &gateway{t: t, fakes: map[string]*fakeprovider.Server{}, logs: &testlog.Buffer{}}
	cfg := &configv1.Config{RouterSettings: o.settings, FallbackChains: o.chains}
	type endpoint struct {
		ID   string
		Host string
		Port int
	}
	var eps []endpoint
	secrets := map[string]string{}
	for _, d := range deps {
		fake, err := fakeprovider.New(fakeprovider.Options{Kind: d.Kind, Name: d.ID, APIKey: d.key()})
		if err != nil {
			t.Fatal(err)
		}
		var addr string
		if d.URL != "" {
			addr = strings.TrimPrefix(d.URL, "http://")
		} else if d.Down {
			addr = testnet.DeadAddress(t)
		} else {
			ts := httptest.NewServer(fake)
			t.Cleanup(func() { fake.Close(); ts.Close() })
			addr = ts.Listener.Addr().String()
		}
		g.fakes[d.ID] = fake
		host, port := splitHostPort(t, addr)
		eps = append(eps, endpoint{ID: d.ID, Host: host, Port: port})
		cd := &configv1.Deployment{
			Id: d.ID, PublicModel: d.Model, Provider: providerName(d.Kind), BaseUrl: "http://" + addr,
			ProviderModel: d.ProviderModel,
		}
		if d.Kind == fakeprovider.Azure {
			cd.ApiVersion = "2024-10-21"
		}
		if d.Weight > 0 {
			w := d.Weight
			cd.Weight = &w
		}
		if d.Price > 0 {
			cd.Price = &configv1.Price{InputPerMillion: &d.Price, OutputPerMillion: &d.Price}
		}
		if d.RPMLimit > 0 {
			cd.RpmLimit = &d.RPMLimit
		}
		cd.Capabilities = d.Capabilities
		if d.ResponseMs > 0 || d.TotalMs > 0 || d.IdleMs > 0 {
			p, sp := &configv1.ExecutionPolicy{}, &configv1.ExecutionPolicy{}
			if d.ResponseMs > 0 {
				p.ResponseMs, sp.ResponseMs = &d.ResponseMs, &d.ResponseMs
			}
			if d.TotalMs > 0 {
				p.TotalMs, sp.TotalMs = &d.TotalMs, &d.TotalMs
			}
			if d.IdleMs > 0 {
				sp.IdleMs = &d.IdleMs
			}
			cd.ExecutionPolicyOverrides = map[string]*configv1.OperationPolicy{"text": {Json: p, Stream: sp}}
		}
		secrets[d.ID] = d.key()
		if d.WrongKey {
			secrets[d.ID] = "sk-wrong-key"
		}
		cfg.Deployments = append(cfg.Deployments, cd)
	}
	validator, err := config.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	if err := validator.Config(cfg); err != nil {
		t.Fatal(err)
	}
	snap, err := config.Compile(1, cfg, secrets)
	if err != nil {
		t.Fatal(err)
	}
	n := max(o.replicas, 1)
	g.store = o.store
	if g.store == nil {
		g.store = memstore.New()
	}
	log := slog.New(slog.NewJSONHandler(g.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	keys := testKeys(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if n > 1 {
		// Several replicas follow the shared store, as in production, rather than each
		// holding its own compiled copy: an admin change through any replica reaches all.
		for _, d := range cfg.Deployments {
			d.ApiKey = secrets[d.Id]
		}
		if _, err := g.store.ReplaceConfig(ctx, cfg); err != nil {
			t.Fatalf("seeding the configuration store: %v", err)
		}
	}
	// Several replicas sit behind one trampoline address (a load balancer), which xDS
	// publishes: it is known before the replicas start.
	var rr *roundRobin
	if n > 1 {
		rr = listenRoundRobin(t)
	}
	for i := 0; i < n; i++ {
		st := g.store
		if i < len(o.replicaStores) {
			st = o.replicaStores[i]
		}
		auth := o.clientAuth
		if auth.Mode == extproc.ClientAuthKeys && auth.Verifier == nil {
			auth.Verifier = admin.NewVerifier(st, admin.VerifierOptions{})
		}
		live := config.NewLive(snap)
		if n > 1 {
			live = &config.Live{}
			if err := live.Reload(ctx, st, validator); err != nil {
				t.Fatalf("replica %d: loading the configuration: %v", i, err)
			}
			go config.Follower{PollInterval: followPoll, Logger: log.With("replica", i)}.Run(ctx, live, st, validator)
		}
		spec := replicaSpec{live: live, store: st, keys: keys, auth: auth, xds: o.xds, log: log.With("replica", i)}
		if rr != nil {
			spec.trampoline = rr.addr()
		}
		g.replicas = append(g.replicas, startReplica(t, ctx, spec))
	}
	trampoline := g.replicas[0].TrampolineAddr()
	if rr != nil {
		rr.serve(g.trampAddrs())
		trampoline = rr.addr()
	}
	if o.xds {
		g.sim = startXDSEnvoy(t, ctx, g, log)
		g.base = "http://" + g.sim.Addr("ingress")
		var clusters []string
		for _, d := range deps {
			clusters = append(clusters, contract.ClusterName(d.ID))
		}
		g.waitForXDS(clusters...)
		g.dumpLogsOnFailure()
		return g
	}
	// With two replicas the route role runs on the first and the attempt role on the
	// second (envoysim's gRPC client, like Envoy's, keeps one connection per cluster), and
	// trampoline connections alternate between them.
	extAddr, attemptAddr, trampAddr := g.replicas[0].ExtProcAddr(), g.replicas[0].ExtProcAddr(), trampoline
	attemptCluster := "switchyard_extproc"
	if n > 1 {
		attemptAddr, attemptCluster = g.replicas[1].ExtProcAddr(), "switchyard_extproc_attempt"
	}
	ah, ap := splitHostPort(t, attemptAddr)
	eh, ep := splitHostPort(t, extAddr)
	th, tp := splitHostPort(t, trampAddr)
	tmpl, err := template.ParseFiles("../../envoy/static-clusters.yaml.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	var yaml bytes.Buffer
	err = tmpl.Execute(&yaml, map[string]any{
		"ListenPort":        0,
		"MaxRedirects":      contract.DefaultMaxRedirects,
		"ConnectTimeout":    "1s",
		"ExtProc":           endpoint{Host: eh, Port: ep},
		"AttemptExtProc":    endpoint{Host: ah, Port: ap},
		"AttemptCluster":    attemptCluster,
		"Trampoline":        endpoint{Host: th, Port: tp},
		"Deployments":       eps,
		"StreamIdleTimeout": o.streamIdleTimeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := sim.Load(yaml.Bytes())
	if err != nil {
		t.Fatalf("loading the rendered bootstrap: %v", err)
	}
	s, err := sim.New(bs, sim.WithListenerAddress("ingress", "127.0.0.1:0"),
		sim.WithLogger(log.With("component", "envoysim")))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); s.Close() })
	g.sim = s
	g.base = "http://" + s.Addr("ingress")
	g.dumpLogsOnFailure()
	return g
}

func (g *gateway) dumpLogsOnFailure() {
	g.t.Cleanup(func() {
		if g.t.Failed() && os.Getenv("SWITCHYARD_E2E_LOGS") != "" {
			g.t.Log(g.logs.String())
		}
	})
}

// replicaSpec is what a test replica is made of.
type replicaSpec struct {
	live  *config.Live
	store store.Store
	keys  attemptstate.Keys
	auth  extproc.ClientAuth
	// xds: the replica serves ADS too, publishing trampoline (its own when empty).
	xds        bool
	trampoline string
	log        *slog.Logger
}

func startReplica(t *testing.T, ctx context.Context, s replicaSpec) *instance {
	t.Helper()
	router := routing.New(s.live, s.store, routing.Options{Logger: s.log})
	reg := prometheus.NewRegistry()
	c := replica.Config{Router: router, Live: s.live, Keys: s.keys, ClientAuth: s.auth, Logger: s.log, Registry: reg,
		TrampolineAdvertise: s.trampoline}
	if s.xds {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.Listeners.XDS = ln
	}
	r, err := replica.New(c)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 3)
	r.Serve(ctx, errc)
	t.Cleanup(func() {
		// envoysim closed first (its cleanup was registered later); what is left drains briefly.
		r.Stop(2 * time.Second)
		select {
		case err := <-errc:
			t.Errorf("replica: %v", err)
		default:
		}
	})
	ops := httptest.NewServer(admin.Handler(router, admin.Options{Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}))
	t.Cleanup(ops.Close)
	return &instance{Replica: r, router: router, live: s.live, reg: reg, metricsURL: ops.URL + "/metrics"}
}

func (g *gateway) trampAddrs() []string {
	var out []string
	for _, r := range g.replicas {
		out = append(out, r.TrampolineAddr())
	}
	return out
}

// roundRobin listens on loopback and sends each accepted connection to the next of its
// addresses: a stand-in for a load balancer in front of several switchyard replicas.
type roundRobin struct {
	ln net.Listener
}

func listenRoundRobin(t *testing.T) *roundRobin {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return &roundRobin{ln: ln}
}

func (rr *roundRobin) addr() string { return rr.ln.Addr().String() }

// serve starts accepting; connections wait in the backlog until then.
func (rr *roundRobin) serve(addrs []string) {
	go func() {
		for i := 0; ; i++ {
			c, err := rr.ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addrs[i%len(addrs)])
			if err != nil {
				_ = c.Close()
				continue
			}
			go pipe(c, up)
		}
	}()
}

func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	_ = a.Close()
	_ = b.Close()
	<-done
}

func splitHostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return h, n
}

func providerName(k fakeprovider.Kind) string {
	switch k {
	case fakeprovider.Azure:
		return "azure-openai"
	case fakeprovider.Anthropic:
		return "anthropic"
	default:
		return "openai"
	}
}

// served returns how many requests each fake received.
func (g *gateway) served() map[string]int {
	out := map[string]int{}
	for id, f := range g.fakes {
		if n := len(f.Requests()); n > 0 {
			out[id] = n
		}
	}
	return out
}

// deploymentStatus is replica's status view (behaviour §10.3) of deployment id of model; the
// test fails when the deployment is missing from it.
func (g *gateway) deploymentStatus(replica int, model, id string) routing.DeploymentStatus {
	g.t.Helper()
	st, _, err := g.replicas[replica].router.Status(context.Background(), model)
	if err != nil {
		g.t.Fatal(err)
	}
	for _, s := range st {
		if s.ID == id {
			return s
		}
	}
	g.t.Fatalf("no status for %s in %+v", id, st)
	return routing.DeploymentStatus{}
}

// inFlight sums the in-flight attempts of every deployment in the shared store.
func (g *gateway) inFlight(ids ...string) int64 {
	g.t.Helper()
	refs := make([]store.DeploymentRef, len(ids))
	for i, id := range ids {
		refs[i] = store.DeploymentRef{ID: id, Domain: store.DomainOf(id, "")}
	}
	out := make([]store.DeploymentState, len(ids))
	if err := g.store.ReadStates(context.Background(), time.Now(), refs, out); err != nil {
		g.t.Fatal(err)
	}
	var n int64
	for _, s := range out {
		n += s.Metrics.InFlight
	}
	return n
}

// eventually polls cond (real I/O settling, never logic) until it holds or wait passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// post sends a raw request through the gateway.
func (g *gateway) post(path, body string, headers map[string]string) (*http.Response, []byte) {
	g.t.Helper()
	resp, b, err := g.tryPost(path, body, headers)
	if err != nil {
		g.t.Fatal(err)
	}
	return resp, b
}

// tryPost is post for another goroutine than the test's, where t.Fatal must not be called.
func (g *gateway) tryPost(path, body string, headers map[string]string) (*http.Response, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, g.base+path, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return tryDo(req)
}

func (g *gateway) do(req *http.Request) (*http.Response, []byte) {
	g.t.Helper()
	resp, body, err := tryDo(req)
	if err != nil {
		g.t.Fatal(err)
	}
	return resp, body
}

// tryDo sends req with the harness's deadline and reads the whole response.
func tryDo(req *http.Request) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, nil, fmt.Errorf("reading the response: %w", err)
	}
	return resp, buf.Bytes(), nil
}
