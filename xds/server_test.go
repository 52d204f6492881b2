package xds

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/config"
)

// wait bounds every blocking step; a safety net, never a sleep.
const wait = 20 * time.Second

type xdsFixture struct {
	srv  *Server
	addr string
	reg  *prometheus.Registry
	live *config.Live
	// stop ends Serve and returns its result (at most once; cleanup calls it too).
	stop func() error
}

// startServer serves ADS for live on a free loopback port until the test ends.
func startServer(t *testing.T, live *config.Live, o Options, build func(*config.Snapshot, Options) (*cache.Snapshot, []Omission, error)) *xdsFixture {
	t.Helper()
	f := &xdsFixture{reg: prometheus.NewRegistry(), live: live}
	srv, err := NewServer(live, o, slog.New(slog.DiscardHandler), f.reg)
	if err != nil {
		t.Fatal(err)
	}
	if build != nil {
		srv.build = build
	}
	f.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, ln) }()
	var once sync.Once
	var serveErr error
	f.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case serveErr = <-errc:
			case <-time.After(wait):
				serveErr = errors.New("Serve did not return after its context ended")
			}
		})
		return serveErr
	}
	t.Cleanup(func() {
		if err := f.stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return f
}

// poll waits until the server has handled the live configuration's version (published it,
// or failed to): the live configuration tells the server of a change, nothing polls.
func (f *xdsFixture) poll(t *testing.T) {
	t.Helper()
	want := f.live.Load().Version
	deadline := time.Now().Add(wait)
	for {
		if p := f.srv.Publication(); p.Published == want || p.Failed == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("version %d never handled: %+v", want, f.srv.Publication())
		}
		time.Sleep(time.Millisecond) // waiting on the server's goroutine, not on a timer of its own
	}
}

// startEnvoy runs envoysim on the shipped bootstrap (envoy/envoy.yaml), its ADS cluster
// pointed at xdsAddr and its ext_proc cluster at extProcAddr.
func startEnvoy(t *testing.T, xdsAddr, extProcAddr string) *sim.Sim {
	t.Helper()
	bs, err := sim.LoadFile("../envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Port 0: tests run in parallel.
	bs.GetAdmin().GetAddress().GetSocketAddress().PortSpecifier = &corev3.SocketAddress_PortValue{}
	s, err := sim.New(bs,
		sim.WithListenerAddress("ingress", "127.0.0.1:0"),
		sim.WithClusterAddress("switchyard_xds", xdsAddr),
		sim.WithClusterAddress("switchyard_extproc", extProcAddr),
		sim.WithADSInitialBackoff(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); s.Close() })
	return s
}

func waitFor(t *testing.T, s *sim.Sim, clusters ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := s.WaitForClusters(ctx, clusters...); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitForRouteConfigs(ctx, DefaultRouteConfigName); err != nil {
		t.Fatal(err)
	}
}

// hasCluster reports whether s has the cluster now.
func hasCluster(s *sim.Sim, name string) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return s.WaitForClusters(ctx, name) == nil
}

// An Envoy on the shipped bootstrap gets the clusters and the route over ADS; a new
// configuration version (a new deployment) reaches it without a restart; an Envoy that
// connects later gets the current snapshot at once.
func TestADSFollowsLiveConfiguration(t *testing.T) {
	live := config.NewLive(compile(t, 1, dep("a", "openai", "http://127.0.0.1:18081/v1")))
	f := startServer(t, live, Options{Trampoline: "127.0.0.1:9003"}, nil)
	envoy := startEnvoy(t, f.addr, "127.0.0.1:1")
	waitFor(t, envoy, "sy-dep-a")
	if hasCluster(envoy, "sy-dep-b") {
		t.Fatal("sy-dep-b before it was configured")
	}

	live.Store(compile(t, 2, dep("a", "openai", "http://127.0.0.1:18081/v1"), dep("b", "openai", "https://api.openai.com/v1")))
	f.poll(t)
	waitFor(t, envoy, "sy-dep-a", "sy-dep-b")
	if got := value(t, f.srv.metrics.version); got != 2 {
		t.Errorf("switchyard_xds_snapshot_version %v, want 2", got)
	}

	late := startEnvoy(t, f.addr, "127.0.0.1:1")
	waitFor(t, late, "sy-dep-a", "sy-dep-b")
}

// A snapshot the Envoy rejects is NACKed: counted by type URL and logged, the Envoy keeps
// the previous clusters, and the next good version is accepted.
func TestNACKKeepsPreviousSnapshot(t *testing.T) {
	// Version 2's clusters carry outlier_detection, which envoysim rejects (as it rejects
	// every field it does not implement, README "Not supported"). Build never emits it.
	poisoned := func(s *config.Snapshot, o Options) (*cache.Snapshot, []Omission, error) {
		out, omitted, err := Build(s, o)
		if err != nil || s.Version != 2 {
			return out, omitted, err
		}
		for _, r := range out.GetResources(resource.ClusterType) {
			r.(*clusterv3.Cluster).OutlierDetection = &clusterv3.OutlierDetection{}
		}
		return out, omitted, nil
	}
	live := config.NewLive(compile(t, 1, dep("a", "openai", "http://127.0.0.1:18081/v1")))
	f := startServer(t, live, Options{Trampoline: "127.0.0.1:9003"}, poisoned)
	envoy := startEnvoy(t, f.addr, "127.0.0.1:1")
	waitFor(t, envoy, "sy-dep-a")

	live.Store(compile(t, 2, dep("a", "openai", "http://127.0.0.1:18081/v1"), dep("b", "openai", "http://127.0.0.1:18082/v1")))
	f.poll(t)
	nacks := f.srv.metrics.nacks.WithLabelValues(resource.ClusterType)
	deadline := time.Now().Add(wait)
	for value(t, nacks) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no NACK counted")
		}
		time.Sleep(5 * time.Millisecond) // polling a real gRPC exchange
	}
	if !hasCluster(envoy, "sy-dep-a") || hasCluster(envoy, "sy-dep-b") {
		t.Fatal("after the NACK the Envoy should keep exactly the previous clusters")
	}
	if n := series(f.srv.metrics.nacks); n != 1 {
		t.Errorf("%d NACK series, want only the cluster type", n)
	}

	live.Store(compile(t, 3, dep("a", "openai", "http://127.0.0.1:18081/v1"), dep("c", "openai", "http://127.0.0.1:18083/v1")))
	f.poll(t)
	waitFor(t, envoy, "sy-dep-a", "sy-dep-c")
}

// A configuration version that does not build is not published: the previous snapshot
// stays, the failure is counted once, and a later good version is published.
func TestBuildFailureKeepsPreviousSnapshot(t *testing.T) {
	live := config.NewLive(compile(t, 1, dep("a", "openai", "http://127.0.0.1:18081/v1")))
	broken := func(s *config.Snapshot, o Options) (*cache.Snapshot, []Omission, error) {
		if s.Version == 2 {
			return nil, nil, errors.New("broken")
		}
		return Build(s, o)
	}
	f := startServer(t, live, Options{Trampoline: "127.0.0.1:9003"}, broken)
	envoy := startEnvoy(t, f.addr, "127.0.0.1:1")
	waitFor(t, envoy, "sy-dep-a")
	live.Store(compile(t, 2, dep("b", "openai", "http://127.0.0.1:18082/v1")))
	f.poll(t)
	f.poll(t) // the same failed version is not retried
	if got := value(t, f.srv.metrics.buildErrors); got != 1 {
		t.Errorf("build errors %v, want 1", got)
	}
	if got := value(t, f.srv.metrics.version); got != 1 {
		t.Errorf("published version %v, want 1", got)
	}
	if p := f.srv.Publication().Problems(2); len(p) != 1 || !strings.Contains(p[0], "xds: last publish failed") || !strings.Contains(p[0], "broken") {
		t.Errorf("problems %q, want the failed publish", p)
	}
	live.Store(compile(t, 3, dep("c", "openai", "http://127.0.0.1:18083/v1")))
	f.poll(t)
	waitFor(t, envoy, "sy-dep-c")
	if hasCluster(envoy, "sy-dep-a") {
		t.Error("sy-dep-a still published after version 3 removed it")
	}
	if p := f.srv.Publication().Problems(3); len(p) != 0 {
		t.Errorf("problems %q once version 3 is published", p)
	}
}

// value reads a counter or gauge.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetCounter().GetValue() + pb.GetGauge().GetValue()
}

func series(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 16)
	c.Collect(ch)
	close(ch)
	return len(ch)
}

// Serve returns when its context ends even while an Envoy holds an ADS stream open.
func TestServeStopsWithConnectedEnvoy(t *testing.T) {
	live := config.NewLive(compile(t, 1, dep("a", "openai", "http://127.0.0.1:18081/v1")))
	f := startServer(t, live, Options{Trampoline: "127.0.0.1:9003"}, nil)
	envoy := startEnvoy(t, f.addr, "127.0.0.1:1")
	waitFor(t, envoy, "sy-dep-a")
	if err := f.stop(); err != nil {
		t.Fatal(err)
	}
}

// compileUnchecked compiles deployments without validating them: a configuration that got
// past validation by another path (written straight into the store, an older release's
// rules).
func compileUnchecked(t *testing.T, v uint64, deps ...*configv1.Deployment) *config.Snapshot {
	t.Helper()
	snap, err := config.Compile(v, &configv1.Config{Deployments: deps}, map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// Issue 16 item 2: a deployment whose cluster cannot be built is left out, counted once and
// reported; every other deployment, and every later change, is still published.
func TestBadDeploymentLeftOutOthersPublished(t *testing.T) {
	good := func(id string) *configv1.Deployment { return dep(id, "openai", "http://127.0.0.1:18081/v1") }
	live := config.NewLive(compile(t, 1, good("a")))
	f := startServer(t, live, Options{Trampoline: "127.0.0.1:9003"}, nil)
	envoy := startEnvoy(t, f.addr, "127.0.0.1:1")
	waitFor(t, envoy, "sy-dep-a")

	live.Store(compileUnchecked(t, 2, good("a"), dep("bad", "openai", "ftp://user:hunter2@x"), good("b")))
	f.poll(t)
	waitFor(t, envoy, "sy-dep-a", "sy-dep-b")
	if hasCluster(envoy, "sy-dep-bad") {
		t.Fatal("the unbuildable deployment has a cluster")
	}
	p := f.srv.Publication()
	if p.Published != 2 || p.Failed != 0 || len(p.Omitted) != 1 || !strings.Contains(p.Omitted["bad"], "scheme") {
		t.Fatalf("publication %+v, want version 2 with bad omitted for its scheme", p)
	}
	if strings.Contains(p.Omitted["bad"], "hunter2") {
		t.Fatalf("the omission reason repeats the URL's credential: %q", p.Omitted["bad"])
	}
	// A later good deployment is published; the same bad one is not counted again.
	live.Store(compileUnchecked(t, 3, good("a"), dep("bad", "openai", "ftp://user:hunter2@x"), good("b"), good("c")))
	f.poll(t)
	waitFor(t, envoy, "sy-dep-a", "sy-dep-b", "sy-dep-c")
	if got := value(t, f.srv.metrics.omissions); got != 1 {
		t.Errorf("omissions %v, want 1 (counted once, not per version)", got)
	}
	if got := value(t, f.srv.metrics.omitted); got != 1 {
		t.Errorf("omitted gauge %v, want 1", got)
	}
	if got := value(t, f.srv.metrics.buildErrors); got != 0 {
		t.Errorf("build errors %v, want 0: the snapshot itself built", got)
	}
	live.Store(compile(t, 4, good("a"), good("c")))
	f.poll(t)
	deadline := time.Now().Add(wait)
	for hasCluster(envoy, "sy-dep-b") {
		if time.Now().After(deadline) {
			t.Fatal("version 4 never reached the Envoy")
		}
		time.Sleep(5 * time.Millisecond) // polling a real gRPC exchange
	}
	if got := value(t, f.srv.metrics.omitted); got != 0 || len(f.srv.Publication().Omitted) != 0 {
		t.Errorf("omitted gauge %v, publication %+v after the bad deployment was removed", got, f.srv.Publication())
	}
}
