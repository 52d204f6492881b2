package sim

import (
	"fmt"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/ads"
)

// startADS connects to the bootstrap's ads_config cluster and subscribes: CDS
// (wildcard, by the ads package), EDS for EDS clusters, RDS for HCMs using rds.
func (s *Sim) startADS() error {
	ac := s.bs.GetDynamicResources().GetAdsConfig()
	if ac == nil {
		return nil
	}
	eg := ac.GetGrpcServices()[0].GetEnvoyGrpc()
	conn, err := s.grpc.get(eg.GetClusterName(), eg.GetAuthority())
	if err != nil {
		return fmt.Errorf("envoysim: ads_config: %w", err)
	}
	s.adsClient = ads.New(ads.Config{
		Conn:           conn,
		Node:           s.bs.GetNode(),
		Handler:        &xdsHandler{s: s},
		Logger:         s.opts.log,
		InitialBackoff: s.opts.adsBackoff,
	})
	var rdsNames []string
	for _, h := range s.rds {
		if !slices.Contains(rdsNames, h.rdsName) {
			rdsNames = append(rdsNames, h.rdsName)
		}
	}
	if len(rdsNames) > 0 {
		s.adsClient.SubscribeRoutes(rdsNames)
	}
	if names := s.cm.edsNames(); len(names) > 0 {
		s.adsClient.SubscribeEndpoints(names)
	}
	client := s.adsClient
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = client.Run(s.ctx)
	}()
	return nil
}

// xdsHandler applies ADS updates. An error NACKs the whole update and keeps the
// previous state, as Envoy rejects an update containing an invalid resource.
type xdsHandler struct{ s *Sim }

// OnClusters applies a CDS state of the world (CdsApiImpl::onConfigUpdate): clusters
// are validated like bootstrap clusters, then EDS names are (re)subscribed.
func (x *xdsHandler) OnClusters(version string, clusters []*clusterv3.Cluster) error {
	s := x.s
	if s.bs.GetDynamicResources().GetCdsConfig() == nil {
		return nil // the bootstrap does not take clusters from CDS
	}
	built := make([]*cluster, 0, len(clusters))
	seen := map[string]bool{}
	for _, c := range clusters {
		if seen[c.GetName()] {
			return fmt.Errorf("duplicate cluster %s found", c.GetName())
		}
		seen[c.GetName()] = true
		if err := validateResource(c, fmt.Sprintf("cluster %q", c.GetName())); err != nil {
			return err
		}
		bc, err := s.buildCluster(c, false)
		if err != nil {
			return err
		}
		if err := s.checkFilterClusters(bc.upstreamFilters); err != nil {
			return fmt.Errorf("cluster %q: %w", c.GetName(), err)
		}
		built = append(built, bc)
	}
	s.cm.applyCDS(built)
	s.adsClient.SubscribeEndpoints(s.cm.edsNames())
	s.log.Info("CDS applied", "version", version, "clusters", len(built))
	return nil
}

// OnEndpoints applies EDS assignments (EdsClusterImpl::onConfigUpdate).
func (x *xdsHandler) OnEndpoints(version string, clas []*endpointv3.ClusterLoadAssignment) error {
	for _, cla := range clas {
		if err := validateResource(cla, fmt.Sprintf("cluster_load_assignment %q", cla.GetClusterName())); err != nil {
			return err
		}
	}
	if err := x.s.cm.applyEDS(clas); err != nil {
		return err
	}
	x.s.log.Info("EDS applied", "version", version, "assignments", len(clas))
	return nil
}

// OnRoutes applies RDS route configurations (RdsRouteConfigSubscription); streams
// already started keep the route table they snapped.
func (x *xdsHandler) OnRoutes(version string, rcs []*routev3.RouteConfiguration) error {
	tables := map[string]*routeTable{}
	for _, rc := range rcs {
		if err := validateResource(rc, fmt.Sprintf("route_configuration %q", rc.GetName())); err != nil {
			return err
		}
		rt, err := compileRouteTable(rc)
		if err != nil {
			return fmt.Errorf("route_configuration %q: %w", rc.GetName(), err)
		}
		tables[rc.GetName()] = rt
	}
	for _, h := range x.s.rds {
		if rt, ok := tables[h.rdsName]; ok {
			h.routes.Store(rt)
		}
	}
	x.s.cm.bump()
	x.s.log.Info("RDS applied", "version", version, "routes", len(rcs))
	return nil
}
