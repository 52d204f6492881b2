package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/switchyard-gw/switchyard/admin"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/xds"
)

// xdsCheck is the xDS server's /readyz check. A configuration version that did not publish
// (the Envoys keep the previous snapshot) or a deployment left out of the snapshot marks it
// degraded, like a store outage: the replica still serves, so failing the probe on every
// replica at once for one bad configuration would only turn it into an outage.
func xdsCheck(s *xds.Server, live *config.Live) func(context.Context) admin.Readiness {
	return func(context.Context) admin.Readiness {
		p := s.Publication()
		r := admin.Readiness{Name: "xds", Ready: true, Detail: fmt.Sprintf("published version %d", p.Published)}
		var parts []string
		if cur := live.Load(); p.Failed != 0 && cur != nil && p.Published < cur.Version {
			parts = append(parts, fmt.Sprintf("xds: last publish failed: configuration version %d is not published "+
				"(Envoys keep version %d): %s", p.Failed, p.Published, p.Err))
		}
		if len(p.Omitted) > 0 {
			ids := slices.Sorted(maps.Keys(p.Omitted))
			for i, id := range ids {
				ids[i] = id + " (" + p.Omitted[id] + ")"
			}
			parts = append(parts, "xds: deployments left out of the snapshot, they get no traffic: "+strings.Join(ids, ", "))
		}
		if len(parts) > 0 {
			r.Degraded = true
			r.Detail += "; " + strings.Join(parts, "; ")
		}
		return r
	}
}

// omitted is the status view's report of the deployments without a cluster; nil without
// an xDS server.
func (dp *dataPlane) omitted() map[string]string {
	if dp.xds == nil {
		return nil
	}
	return dp.xds.Publication().Omitted
}
