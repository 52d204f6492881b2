package routing

import (
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

// plan fills the decision's hops and their candidates (behaviour §7.6, §9.2), in the order
// the passes visit them: for the general reason the requested model then its general
// fallback chain; for a context-window or content-policy refusal that reason's chain. Models
// that refused the request are left out, and so are deployments that are switched off,
// drained (weight 0 under a weight-drawn strategy), cannot keep the request's contract
// (recorded as skips), or used up their own attempt limit. x.d.Reason and x.d.ReasonFrom
// name the chain.
func (x *decision) plan() {
	x.hops, x.cands, x.refs, x.disabled, x.drained = x.hops[:0], x.cands[:0], x.refs[:0], 0, 0
	crossModel := x.snap.Policy(x.req.Model).CrossModelFallbackAllowed
	switch {
	case x.d.Reason == config.ReasonGeneral:
		x.addHop(x.req.Model)
		if crossModel {
			x.addChain(chainFor(x.snap, config.ReasonGeneral, x.req.Model))
		}
	case crossModel:
		x.addChain(chainFor(x.snap, x.d.Reason, x.d.ReasonFrom, x.req.Model))
	}
	x.orderHops()
}

// addChain adds a hop for every target of c, if any.
func (x *decision) addChain(c *config.Chain) {
	if c == nil {
		return
	}
	for _, m := range c.Targets {
		x.addHop(m)
	}
}

// addHop adds model's hop with the candidates that may take the request, unless the plan
// holds it already or the model is out of the request's reach.
func (x *decision) addHop(model string) {
	for _, hp := range x.hops {
		if hp.model == model {
			return
		}
	}
	if x.h.refused(model) {
		return
	}
	if !x.req.allows(model) {
		x.skip(Skip{Model: model, Cause: SkipPolicy, Why: "the API key may not use this model"})
		return
	}
	g := x.snap.Groups[model]
	if g == nil {
		x.skip(Skip{Model: model, Cause: SkipUnserved, Why: "no deployments serve this model"})
		return
	}
	hp := hop{model: model, first: len(x.cands)}
	incompatible := 0
	for _, dep := range g.Deployments {
		if x.addCandidate(model, dep) {
			incompatible++
		}
	}
	hp.end = len(x.cands)
	if hp.end == hp.first && incompatible > 0 && model != x.req.Model {
		x.skip(Skip{Model: model, Cause: SkipCapability, Why: "no deployment of this fallback model keeps the request's contract"})
	}
	x.hops = append(x.hops, hp)
}

// addCandidate adds dep, a deployment of model, to the hop being planned when it may take the
// request. It reports whether dep was left out for not keeping the request's contract.
func (x *decision) addCandidate(model string, dep *config.Deployment) (incompatible bool) {
	if !dep.Enabled {
		x.disabled++
		return false
	}
	if drawsByWeight(x.snap.Settings.Strategy) && dep.Weight == 0 {
		// Weight 0 is never drawn by the weighted draw, and health-aware multiplies it
		// away (behaviour §2): a drained deployment takes no traffic, failover included.
		x.drained++
		return false
	}
	if why := x.req.Facts.Unmet(dep, x.req.Stream); why != "" {
		x.skip(Skip{Deployment: dep.ID, Model: model, Cause: SkipCapability, Why: why})
		return true
	}
	if limit := dep.MaxAttempts(x.req.Operation, x.req.Mode()); limit > 0 && x.h.askedOn(dep.ID) >= limit {
		return false
	}
	// A deployment's lower totalMs shortens what its attempts may use, never the request.
	window := min(x.left, x.req.Start.Add(dep.Total(&x.snap.Settings, x.req.Operation, x.req.Mode())).Sub(x.now))
	c := candidate{dep: dep, hop: len(x.hops), window: window}
	if last := x.h.lastOn(dep.ID); last != nil {
		c.tried, c.reusable = true, reusableAfter(last)
	}
	x.cands = append(x.cands, c)
	x.refs = append(x.refs, dep.Ref())
	return false
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

// skip adds k to the decision's skips unless the request recorded it already (in its
// History or in this decision): one record per target and request.
func (x *decision) skip(k Skip) {
	if skipped(x.h.Skips, k) || skipped(x.d.Skips, k) {
		return
	}
	x.d.Skips = append(x.d.Skips, k)
}

// orderHops sets x.order: hops in plan order (failover before fallback, behaviour §7.7),
// unless the requested model's policy turns sameModelFailoverFirst off, in which case after
// a failure the hops after the failing model come first (behaviour §9.3).
func (x *decision) orderHops() {
	x.order = x.order[:0]
	start := 0
	if x.last != nil && !x.snap.Policy(x.req.Model).SameModelFailoverFirst {
		for i, hp := range x.hops {
			if hp.model == x.last.Model {
				start = i + 1
				break
			}
		}
	}
	for k := range x.hops {
		x.order = append(x.order, (start+k)%len(x.hops))
	}
}
