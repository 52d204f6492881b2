package routing

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// scratch holds a decision's working slices, pooled so a decision allocates almost nothing.
type scratch struct {
	hops   []hop
	cands  []candidate
	refs   []store.DeploymentRef
	states []store.DeploymentState
	idx    []int
	order  []int
	// disabled counts deployments switched off by their kill switch.
	disabled int
}

// hop is one public model of the plan, with its candidates cands[first:end].
type hop struct {
	model      string
	first, end int
}

// Decide returns the next action for req given what happened so far (see the package
// documentation for the flow). h may be nil for a new request; Decide never modifies it.
func (r *Router) Decide(ctx context.Context, req *Request, h *History) Decision {
	if h == nil {
		h = &History{}
	}
	now := r.clock.Now()
	snap := r.config.Load()
	if snap == nil {
		return stopWith(Decision{}, &StopError{Status: http.StatusServiceUnavailable, Code: "model_unavailable", Message: "The gateway has no configuration loaded yet."})
	}
	global := snap.Settings.Policy(req.Operation, req.Mode())
	d := Decision{Deadline: req.Start.Add(global.Total), Reason: h.Reason}
	if _, ok := snap.Groups[req.Model]; !ok {
		return stopWith(d, &StopError{Status: http.StatusNotFound, Code: "model_not_found", Message: "The model `" + req.Model + "` does not exist."})
	}

	last := h.Last()
	reason, from := h.Reason, h.ReasonFrom
	if last != nil {
		switch last.Class {
		case failure.ClassRequest:
			// Another deployment of the same model would refuse it too (SPEC §7.3); only a
			// dedicated context-window or content-policy chain may take it (SPEC §7.6).
			rs, ok := refusalReason(last.Kind)
			if !ok || !snap.Policy(req.Model).CrossModelFallbackAllowed || chainFor(snap, rs, last.Model, req.Model) == nil {
				return stopWith(d, upstreamStop(last))
			}
			reason, from = rs, last.Model
		case failure.ClassGateway, failure.ClassNone:
			return stopWith(d, upstreamStop(last))
		}
	}
	d.Reason = reason
	if len(h.Attempts) >= global.MaxAttempts {
		return stopWith(d, upstreamStop(last))
	}
	left := d.Deadline.Sub(now)
	if left < MinAttemptTime {
		return stopWith(d, deadlineStop(last))
	}

	s := r.scratch.Get().(*scratch)
	defer r.scratch.Put(s)
	r.plan(snap, req, h, reason, from, s, &d)
	if n := len(s.cands); n > 0 {
		s.states = slices.Grow(s.states[:0], n)[:n]
		if err := r.store.ReadStates(ctx, now, s.refs, s.states); err != nil {
			// Routing must not fail because the shared store did: use neutral state (every
			// circuit closed, no metrics) and say so (DESIGN.md, "Store").
			clear(s.states)
			d.Degraded = true
			r.log.Warn("reading routing state failed; deciding on neutral state", "err", err)
		}
		for i := range s.cands {
			s.cands[i].state = s.states[i]
			assess(&s.cands[i], now)
		}
	}
	r.hopOrder(snap, req, last, s)

	// First pass: a deployment nobody tried in this request, at once (SPEC §7.1).
	for _, hi := range s.order {
		if c := r.choose(ctx, snap, req, now, s, hi, func(c *candidate) bool { return !c.tried && c.block.usable() }, &d); c != nil {
			return r.attempt(d, snap, req, last, c, 0, left)
		}
	}
	// Reuse: ask a deployment again after the backoff (SPEC §7.2), if the wait fits.
	for _, hi := range s.order {
		if c := r.reusable(ctx, snap, req, h, now, left, s, hi, false, &d); c != nil {
			return r.attempt(d, snap, req, last, c, r.reuseWait(snap, h, c.dep.ID), left)
		}
	}
	// Every circuit open: seed 001's "try the full list anyway", opt-in (SPEC §7.5).
	if snap.Settings.WhenAllOpen == config.WhenAllOpenTry {
		for _, hi := range s.order {
			if c := r.choose(ctx, snap, req, now, s, hi, func(c *candidate) bool { return !c.tried && c.block.byCircuit() }, &d); c != nil {
				return r.attempt(d, snap, req, last, c, 0, left)
			}
			if c := r.reusable(ctx, snap, req, h, now, left, s, hi, true, &d); c != nil {
				return r.attempt(d, snap, req, last, c, r.reuseWait(snap, h, c.dep.ID), left)
			}
		}
	}
	return stopWith(d, blockedStop(h, s, &d, req.Model, now))
}

// reusable picks a deployment already tried in this request whose last failure allows asking
// it again and whose wait still fits before the deadline. ignoreCircuits is whenAllOpen "try".
func (r *Router) reusable(ctx context.Context, snap *config.Snapshot, req *Request, h *History, now time.Time, left time.Duration, s *scratch, hi int, ignoreCircuits bool, d *Decision) *candidate {
	return r.choose(ctx, snap, req, now, s, hi, func(c *candidate) bool {
		if !c.tried || !c.reusable {
			return false
		}
		if ignoreCircuits {
			if !c.block.byCircuit() {
				return false
			}
		} else if !c.block.usable() {
			return false
		}
		// The wait's upper bound (with full jitter) must leave a meaningful attempt.
		return maxReuseWait(snap, h, c.dep.ID)+MinAttemptTime <= left
	}, d)
}

// choose runs the strategy over hop hi's candidates accepted by keep. A half-open pick must
// win the probe; if it loses, it is dropped and the strategy runs again over the rest.
func (r *Router) choose(ctx context.Context, snap *config.Snapshot, req *Request, now time.Time, s *scratch, hi int, keep func(*candidate) bool, d *Decision) *candidate {
	hp := s.hops[hi]
	s.idx = s.idx[:0]
	for i := hp.first; i < hp.end; i++ {
		if keep(&s.cands[i]) {
			s.idx = append(s.idx, i)
		}
	}
	for len(s.idx) > 0 {
		pos := 0
		if len(snap.Groups[hp.model].Deployments) > 1 {
			// A group of one skips selection entirely (SPEC §2.1).
			pos = pick(snap.Settings.Strategy, s.cands, s.idx, r.rand)
		}
		c := &s.cands[s.idx[pos]]
		if c.block != needsProbe {
			return c
		}
		won, err := r.store.AcquireProbe(ctx, c.dep.ID, req.ID, now, snap.Settings.Circuit.HalfOpenProbe)
		if err != nil {
			r.log.Warn("acquiring a half-open probe failed; passing the deployment over", "deployment", c.dep.ID, "err", err)
		}
		if won {
			d.Probe = true
			return c
		}
		s.idx[pos] = s.idx[len(s.idx)-1]
		s.idx = s.idx[:len(s.idx)-1]
	}
	return nil
}

// attempt fills the decision for an attempt on c after wait.
func (r *Router) attempt(d Decision, snap *config.Snapshot, req *Request, last *Attempt, c *candidate, wait, left time.Duration) Decision {
	d.Action = ActionAttempt
	d.Deployment = c.dep
	d.Model = c.dep.PublicModel
	d.Wait = wait
	d.Policy = c.dep.Policy(&snap.Settings, req.Operation, req.Mode())
	// A deployment's lower totalMs shortens what this attempt may use, never the request.
	window := min(left, req.Start.Add(d.Policy.Total).Sub(r.clock.Now())) - wait
	d.ResponseTimeout = max(min(d.Policy.Response, window), 0)
	switch {
	case last == nil:
		d.Move = MoveFirst
	case c.tried:
		d.Move = MoveRetry
	case c.dep.PublicModel == last.Model || c.dep.PublicModel == req.Model:
		d.Move = MoveFailover
	default:
		d.Move = MoveFallback
	}
	return d
}

// reuseWait is the wait before asking deployment id again (SPEC §7.2): 0.5 s doubling with
// every reuse up to 8 s, never less than retryAfterSeconds nor the provider's Retry-After
// (honoured up to 60 s), plus up to 25% jitter.
func (r *Router) reuseWait(snap *config.Snapshot, h *History, id string) time.Duration {
	w := baseReuseWait(snap, h, id)
	return w + time.Duration(float64(w)*JitterFraction*r.rand.Float64())
}

func maxReuseWait(snap *config.Snapshot, h *History, id string) time.Duration {
	w := baseReuseWait(snap, h, id)
	return w + time.Duration(float64(w)*JitterFraction)
}

func baseReuseWait(snap *config.Snapshot, h *History, id string) time.Duration {
	w := BackoffBase << min(h.reuses(), 5)
	w = min(w, BackoffMax)
	w = max(w, snap.Settings.RetryAfter)
	if a := h.lastOn(id); a != nil {
		w = max(w, min(a.RetryAfter, RetryAfterLimit))
	}
	return w
}

// refusalReason maps a request-class refusal to its dedicated fallback reason.
func refusalReason(k failure.Kind) (config.Reason, bool) {
	switch k {
	case failure.KindContextOverflow:
		return config.ReasonContextWindow, true
	case failure.KindPolicy:
		return config.ReasonContentPolicy, true
	}
	return 0, false
}

// chainFor returns the enabled chain for reason: the refusing model's own, else the
// requested model's.
func chainFor(snap *config.Snapshot, reason config.Reason, models ...string) *config.Chain {
	for _, m := range models {
		if c := snap.Chains[config.ChainKey{Model: m, Reason: reason}]; c != nil && c.Enabled {
			return c
		}
	}
	return nil
}

func stopWith(d Decision, e *StopError) Decision {
	d.Action = ActionStop
	d.Stop = e
	return d
}
