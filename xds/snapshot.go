package xds

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/switchyard-gw/switchyard/routing/config"
)

// Build turns a configuration snapshot into the xDS snapshot every Envoy gets: one cluster
// per deployment (sy-dep-<id>) and the route configuration o.RouteConfigName, versioned by
// the configuration version. It is pure: the same inputs give the same resources.
//
// Disabled deployments keep their cluster: routing never picks them, and removing the
// cluster would make Envoy drain it (and fail a request already routed to it) only for it
// to come back when the deployment is enabled again.
//
// A deployment whose cluster cannot be built (a base URL that slipped past validation, a
// resource failing ValidateAll) is left out and reported in omitted; every other cluster
// is still built, so one bad deployment never holds back the rest (issue: one bad baseUrl
// froze every later publication). Only a route that does not build fails the whole
// snapshot; it depends on the options alone, checked at start.
//
// Every resource passes ValidateAll (the protoc-gen-validate rules Envoy applies), so a
// configuration switchyard accepts never yields a resource Envoy rejects for its shape. The
// snapshot holds no listener (the bootstrap's listener asks for the route over RDS), so
// cache.Snapshot.Consistent, which wants every route referenced by a listener of the same
// snapshot, holds once the bootstrap's listeners are added: the tests check exactly that
// against envoy/envoy.yaml.
func Build(snap *config.Snapshot, opts Options) (out *cache.Snapshot, omitted []Omission, err error) {
	if snap == nil {
		return nil, nil, errors.New("xds: no configuration snapshot")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	ids := make([]string, 0, len(snap.Deployments))
	for id := range snap.Deployments {
		ids = append(ids, id)
	}
	slices.Sort(ids) // deterministic order for goldens and diffs
	clusters := make([]types.Resource, 0, len(ids))
	for _, id := range ids {
		c, err := buildCluster(snap.Deployments[id], o)
		if err == nil {
			err = validate(c)
		}
		if err != nil {
			omitted = append(omitted, Omission{ID: id, Err: err})
			continue
		}
		clusters = append(clusters, c)
	}
	route := buildRoute(o)
	if err := validate(route); err != nil {
		return nil, nil, fmt.Errorf("xds: %w", err)
	}
	resources := map[resource.Type][]types.Resource{
		resource.ClusterType: clusters,
		resource.RouteType:   {route},
	}
	out, err = cache.NewSnapshot(strconv.FormatUint(snap.Version, 10), resources)
	if err != nil {
		return nil, nil, fmt.Errorf("xds: %w", err)
	}
	return out, omitted, nil
}

// Omission is a deployment left out of a snapshot: Err says why its cluster did not build.
type Omission struct {
	ID  string
	Err error
}

// validate applies the protoc-gen-validate rules Envoy applies to r.
func validate(r types.Resource) error {
	if err := r.(interface{ ValidateAll() error }).ValidateAll(); err != nil {
		return fmt.Errorf("%s: %w", cache.GetResourceName(r), err)
	}
	return nil
}
