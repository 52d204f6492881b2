package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchyard-gw/switchyard/admin"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/xds"
)

// xdsCheck is the xDS server's /readyz check. A configuration version that did not publish
// (the Envoys keep the previous snapshot) or a deployment left out of the snapshot marks it
// degraded, like a store outage: the replica still serves, and failing the probe on every
// replica at once for one bad configuration would turn it into an outage.
func xdsCheck(s *xds.Server, live *config.Live) func(context.Context) admin.Readiness {
	return func(context.Context) admin.Readiness {
		p := s.Publication()
		r := admin.Readiness{Name: "xds", Ready: true, Detail: fmt.Sprintf("published version %d", p.Published)}
		var current uint64
		if snap := live.Load(); snap != nil {
			current = snap.Version
		}
		if problems := p.Problems(current); len(problems) > 0 {
			r.Degraded = true
			r.Detail += "; " + strings.Join(problems, "; ")
		}
		return r
	}
}

// omittedOf is the status view's report of the deployments without a cluster; nil without
// an xDS server.
func omittedOf(s *xds.Server) func() map[string]string {
	return func() map[string]string {
		if s == nil {
			return nil
		}
		return s.Publication().Omitted
	}
}
