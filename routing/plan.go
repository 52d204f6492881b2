package routing

import (
	"time"

	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

// plan fills s with the hops of this decision and their candidates (behaviour §7.6, §9.2):
// for the general reason the requested model then its general fallback chain; for a
// context-window or content-policy refusal that reason's chain. Models that refused the
// request are left out, and so are deployments that are switched off, drained (weight 0
// under a weight-drawn strategy), cannot keep the request's contract (recorded as skips), or
// used up their own attempt limit. d.Reason and d.ReasonFrom name the chain.
func (r *Router) plan(snap *config.Snapshot, req *Request, h *History, now time.Time, left time.Duration, s *scratch, d *Decision) {
	s.hops, s.cands, s.refs, s.disabled, s.drained, s.prior = s.hops[:0], s.cands[:0], s.refs[:0], 0, 0, h.Skips
	reason, from := d.Reason, d.ReasonFrom
	crossModel := snap.Policy(req.Model).CrossModelFallbackAllowed
	if reason == config.ReasonGeneral {
		r.addHop(snap, req, h, now, left, req.Model, s, d)
		if !crossModel {
			return
		}
		if c := chainFor(snap, config.ReasonGeneral, req.Model); c != nil {
			for _, m := range c.Targets {
				r.addHop(snap, req, h, now, left, m, s, d)
			}
		}
		return
	}
	if c := chainFor(snap, reason, from, req.Model); c != nil && crossModel {
		for _, m := range c.Targets {
			r.addHop(snap, req, h, now, left, m, s, d)
		}
	}
}

func (r *Router) addHop(snap *config.Snapshot, req *Request, h *History, now time.Time, left time.Duration, model string, s *scratch, d *Decision) {
	for _, hp := range s.hops {
		if hp.model == model {
			return
		}
	}
	if h.refused(model) {
		return
	}
	if !req.allows(model) {
		recordSkip(h.Skips, d, Skip{Model: model, Cause: SkipPolicy, Why: "the API key may not use this model"})
		return
	}
	g := snap.Groups[model]
	if g == nil {
		recordSkip(h.Skips, d, Skip{Model: model, Cause: SkipUnserved, Why: "no deployments serve this model"})
		return
	}
	hp := hop{model: model, first: len(s.cands)}
	incompatible := 0
	drains := drawsByWeight(snap.Settings.Strategy)
	for _, dep := range g.Deployments {
		if !dep.Enabled {
			s.disabled++
			continue
		}
		if drains && dep.Weight == 0 {
			// Weight 0 is never drawn by the weighted draw, and health-aware multiplies it
			// away (behaviour §2): a drained deployment takes no traffic, failover included.
			s.drained++
			continue
		}
		if why := req.Facts.Unmet(dep, req.Stream); why != "" {
			incompatible++
			recordSkip(h.Skips, d, Skip{Deployment: dep.ID, Model: model, Cause: SkipCapability, Why: why})
			continue
		}
		if limit := dep.MaxAttempts(req.Operation, req.Mode()); limit > 0 && h.askedOn(dep.ID) >= limit {
			continue
		}
		// A deployment's lower totalMs shortens what its attempts may use, never the request.
		window := min(left, req.Start.Add(dep.Total(&snap.Settings, req.Operation, req.Mode())).Sub(now))
		c := candidate{dep: dep, hop: len(s.hops), window: window}
		if last := h.lastOn(dep.ID); last != nil {
			c.tried, c.reusable = true, reusableAfter(last)
		}
		s.cands = append(s.cands, c)
		s.refs = append(s.refs, dep.Ref())
	}
	hp.end = len(s.cands)
	if hp.end == hp.first && incompatible > 0 && model != req.Model {
		recordSkip(h.Skips, d, Skip{Model: model, Cause: SkipCapability, Why: "no deployment of this fallback model keeps the request's contract"})
	}
	s.hops = append(s.hops, hp)
}

// reusableAfter reports whether a deployment may be asked again in the same request after
// its last failure: transient failures and throttles may clear; a configuration fault, an
// exhausted quota or an incompatibility will not (behaviour §7.3).
func reusableAfter(a *Attempt) bool {
	switch a.Class {
	case failure.ClassTransient:
		return true
	case failure.ClassThrottle:
		return !a.Quota
	}
	return false
}

// recordSkip adds s to the decision's skips unless the request recorded it already (prior,
// the History's skips, or this decision): one record per target and request.
func recordSkip(prior []Skip, d *Decision, s Skip) {
	if skipped(prior, s) || skipped(d.Skips, s) {
		return
	}
	d.Skips = append(d.Skips, s)
}

// hopOrder sets s.order: hops in plan order (failover before fallback, behaviour §7.7), unless the
// requested model's policy turns sameModelFailoverFirst off, in which case after a failure
// the hops after the failing model come first (behaviour §9.3).
func (r *Router) hopOrder(snap *config.Snapshot, req *Request, last *Attempt, s *scratch) {
	s.order = s.order[:0]
	start := 0
	if last != nil && !snap.Policy(req.Model).SameModelFailoverFirst {
		for i, hp := range s.hops {
			if hp.model == last.Model {
				start = i + 1
				break
			}
		}
	}
	for k := range s.hops {
		s.order = append(s.order, (start+k)%len(s.hops))
	}
}
