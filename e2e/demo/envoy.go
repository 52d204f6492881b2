package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/xds"
)

// startEnvoy runs envoysim on the shipped bootstrap, with its listener, admin and the two
// static switchyard clusters pointed at the demo's addresses (the file's own ports are the
// defaults), and waits until switchyard's xDS delivered every deployment cluster and the
// route.
func startEnvoy(ctx context.Context, f flags, sy switchyardAddrs, cfgPath string, log *slog.Logger) (*sim.Sim, error) {
	bs, err := sim.LoadFile(f.envoy)
	if err != nil {
		return nil, err
	}
	s, err := sim.New(bs, sim.WithLogger(log),
		sim.WithListenerAddress("ingress", f.gateway),
		sim.WithListenerAddress("admin", f.envoyAdmin),
		sim.WithClusterAddress("switchyard_extproc", sy.Extproc),
		sim.WithClusterAddress("switchyard_xds", sy.XDS))
	if err != nil {
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		return nil, fmt.Errorf("envoysim: %w", err)
	}
	clusters, err := deploymentClusters(cfgPath)
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := s.WaitForClusters(ctx, clusters...); err != nil {
		s.Close()
		return nil, fmt.Errorf("envoysim waiting for the deployment clusters over xDS: %w", err)
	}
	if err := s.WaitForRouteConfigs(ctx, xds.DefaultRouteConfigName); err != nil {
		s.Close()
		return nil, fmt.Errorf("envoysim waiting for the route over xDS: %w", err)
	}
	return s, nil
}

// deploymentClusters names the cluster xDS publishes for each deployment of the file.
func deploymentClusters(cfgPath string) ([]string, error) {
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("demo configuration: %w", err)
	}
	var out []string
	for _, id := range gjson.GetBytes(raw, "deployments.#.id").Array() {
		out = append(out, contract.ClusterName(id.String()))
	}
	return out, nil
}
