package gateway_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim"
	"github.com/switchyard-gw/switchyard/xds"
)

// The xds mode of the harness: envoysim runs the shipped bootstrap, an ADS client of
// replica 0, and every deployment cluster and the route come from switchyard's xDS.

// followPoll is how often a replica's follower and xDS server look for a new version: short,
// so an admin change shows quickly; the store's notifications usually come first.
const followPoll = 20 * time.Millisecond

// modes are the two ways envoysim gets its clusters and route.
var modes = []struct {
	name string
	xds  bool
}{{"static", false}, {"xds", true}}

// startXDSEnvoy starts envoysim on envoy/envoy.yaml: the route and attempt roles both on
// replica 0's gRPC server (the bootstrap has one ext_proc cluster), ADS from replica 0.
func startXDSEnvoy(t *testing.T, ctx context.Context, g *gateway, log *slog.Logger) *sim.Sim {
	t.Helper()
	bs, err := sim.LoadFile("../../envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Port 0: tests run in parallel.
	bs.GetAdmin().GetAddress().GetSocketAddress().PortSpecifier = &corev3.SocketAddress_PortValue{}
	s, err := sim.New(bs,
		sim.WithListenerAddress("ingress", "127.0.0.1:0"),
		sim.WithClusterAddress("switchyard_extproc", g.replicas[0].ExtProcAddr()),
		sim.WithClusterAddress("switchyard_xds", g.replicas[0].XDSAddr()),
		sim.WithADSInitialBackoff(10*time.Millisecond),
		sim.WithLogger(log.With("component", "envoysim")))
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	if err := s.Start(sctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); s.Close() })
	return s
}

// waitForXDS waits until envoysim has the clusters and switchyard's route configuration.
func (g *gateway) waitForXDS(clusters ...string) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := g.sim.WaitForClusters(ctx, clusters...); err != nil {
		g.t.Fatalf("waiting for clusters %v: %v", clusters, err)
	}
	if err := g.sim.WaitForRouteConfigs(ctx, xds.DefaultRouteConfigName); err != nil {
		g.t.Fatalf("waiting for the route configuration: %v", err)
	}
}

// versions are the configuration versions in force on every replica.
func (g *gateway) versions() []uint64 {
	out := make([]uint64, len(g.replicas))
	for i, r := range g.replicas {
		if s := r.live.Load(); s != nil {
			out[i] = s.Version
		}
	}
	return out
}

// waitForVersion waits until every replica has version v (or newer) in force, all the same.
func (g *gateway) waitForVersion(v uint64) {
	g.t.Helper()
	eventually(g.t, "every replica at the same version", func() bool {
		vs := g.versions()
		for _, x := range vs {
			if x < v || x != vs[0] {
				return false
			}
		}
		return true
	})
}

// forModes runs a scenario with envoysim on the static template and on xDS.
func forModes(t *testing.T, scenario func(t *testing.T, xdsMode bool)) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { scenario(t, m.xds) })
	}
}
