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
	// scores and vals hold one ranking's scores by position in idx and its known values
	// (cold-start median, see lowest).
	scores, vals []float64
	// disabled counts deployments switched off by their kill switch; drained those left out
	// because their weight is 0 under a weight-drawn strategy (behaviour §2).
	disabled, drained int
	// prior are the skips the request recorded before this decision (History.Skips), so a
	// skip is recorded once.
	prior []Skip
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
	d := Decision{Deadline: req.Start.Add(global.Total), Reason: h.Reason, ReasonFrom: h.ReasonFrom}
	if _, ok := snap.Groups[req.Model]; !ok {
		return stopWith(d, &StopError{Status: http.StatusNotFound, Code: "model_not_found", Message: "The model `" + req.Model + "` does not exist."})
	}

	last := h.Last()
	reason, from := h.Reason, h.ReasonFrom
	if last != nil {
		switch last.Class {
		case failure.ClassRequest:
			// Another deployment of the same model would refuse it too (behaviour §7.3); only a
			// dedicated context-window or content-policy chain may take it (behaviour §7.6).
			rs, ok := refusalReason(last.Kind)
			if !ok || !snap.Policy(req.Model).CrossModelFallbackAllowed || chainFor(snap, rs, last.Model, req.Model) == nil {
				return stopWith(d, upstreamStop(last))
			}
			reason, from = rs, last.Model
		case failure.ClassGateway, failure.ClassNone:
			return stopWith(d, upstreamStop(last))
		}
	}
	d.Reason, d.ReasonFrom = reason, from
	left := d.Deadline.Sub(now)

	s := r.scratch.Get().(*scratch)
	defer r.putScratch(s)
	// behaviour §6.4 counts upstream attempts: incompatibilities the gateway found itself do not
	// spend the budget.
	if h.asked() >= global.MaxAttempts {
		return stopWith(d, r.spent(ctx, snap, req, h, now, left, s, &d, h.FinalStop()))
	}
	if left < MinAttemptTime {
		return stopWith(d, r.spent(ctx, snap, req, h, now, left, s, &d, deadlineStop(last)))
	}
	r.survey(ctx, snap, req, h, now, left, s, &d)
	r.hopOrder(snap, req, last, s)

	// First pass: a deployment nobody tried in this request, at once (behaviour §7.1).
	for _, hi := range s.order {
		if c := r.choose(ctx, snap, req, now, s, hi, func(c *candidate) bool {
			return !c.tried && c.block.usable() && c.window >= MinAttemptTime
		}, &d); c != nil {
			return r.attempt(d, snap, req, last, c, 0)
		}
	}
	// Reuse: ask a deployment again after the backoff (behaviour §7.2), or after its failure
	// domain's capacity circuit reopens, if the wait fits.
	for _, hi := range s.order {
		if c := r.reusable(ctx, snap, req, h, now, s, hi, false, &d); c != nil {
			return r.attempt(d, snap, req, last, c, r.waitBefore(snap, h, c, now, r.rand.Float64(), false))
		}
	}
	// Every circuit open: seed 001's "try the full list anyway", opt-in (behaviour §7.5). A
	// half-open probe owned by another request is not a circuit to ignore: exactly one
	// request holds it (behaviour §5.4).
	if snap.Settings.WhenAllOpen == config.WhenAllOpenTry {
		for _, hi := range s.order {
			if c := r.choose(ctx, snap, req, now, s, hi, func(c *candidate) bool {
				return !c.tried && c.block.byCircuit() && c.window >= MinAttemptTime
			}, &d); c != nil {
				d.AllOpenTry = true
				return r.attempt(d, snap, req, last, c, 0)
			}
			if c := r.reusable(ctx, snap, req, h, now, s, hi, true, &d); c != nil {
				d.AllOpenTry = true
				return r.attempt(d, snap, req, last, c, r.waitBefore(snap, h, c, now, r.rand.Float64(), true))
			}
		}
	}
	return stopWith(d, blockedStop(h, s, &d, req.Model, now))
}

// putScratch returns s to the pool without the skips it pointed to.
func (r *Router) putScratch(s *scratch) {
	s.prior = nil
	r.scratch.Put(s)
}

// survey plans the hops and reads and assesses the live state of every candidate, in one
// store call (behaviour §3).
func (r *Router) survey(ctx context.Context, snap *config.Snapshot, req *Request, h *History, now time.Time, left time.Duration, s *scratch, d *Decision) {
	r.plan(snap, req, h, now, left, s, d)
	n := len(s.cands)
	if n == 0 {
		return
	}
	s.states = slices.Grow(s.states[:0], n)[:n]
	if err := r.store.ReadStates(ctx, now, s.refs, s.states); err != nil {
		// Routing must not fail because the shared store did: use neutral state (every
		// circuit closed, no metrics) and say so (docs/design.md, "Store").
		clear(s.states)
		d.Degraded = true
		r.log.Warn("reading routing state failed; deciding on neutral state", "err", err)
	}
	for i := range s.cands {
		s.cands[i].state = s.states[i]
		assess(&s.cands[i], now)
	}
}

// spent completes a stop for a spent budget or deadline. When the stop tells the client to
// come back later (429, 503), the Retry-After must be when what blocks the model reopens,
// not what the provider said (a capacity circuit may last longer than its Retry-After).
func (r *Router) spent(ctx context.Context, snap *config.Snapshot, req *Request, h *History, now time.Time, left time.Duration, s *scratch, d *Decision, e *StopError) *StopError {
	if !e.Upstream || (e.Status != http.StatusTooManyRequests && e.Status != http.StatusServiceUnavailable) {
		return e
	}
	r.survey(ctx, snap, req, h, now, left, s, d)
	if ra, ok := soonestReopen(s, now); ok {
		e.RetryAfter = ra
	}
	return e
}

// reusable picks a deployment already tried in this request whose last failure allows asking
// it again and whose wait still fits before its deadline. A deployment whose only blocker is
// its failure domain's capacity circuit, reopening within RetryAfterLimit, is waited for
// (behaviour §7.2). ignoreCircuits is whenAllOpen "try".
func (r *Router) reusable(ctx context.Context, snap *config.Snapshot, req *Request, h *History, now time.Time, s *scratch, hi int, ignoreCircuits bool, d *Decision) *candidate {
	return r.choose(ctx, snap, req, now, s, hi, func(c *candidate) bool {
		if !c.tried || !c.reusable {
			return false
		}
		switch {
		case ignoreCircuits:
			if !c.block.byCircuit() {
				return false
			}
		case c.block == blockedCapacity:
			if time.Unix(0, c.untilAvailable).Sub(now) > RetryAfterLimit {
				return false
			}
		case !c.block.usable():
			return false
		}
		// The wait's upper bound (with full jitter) must leave a meaningful attempt.
		return r.waitBefore(snap, h, c, now, 1, ignoreCircuits)+MinAttemptTime <= c.window
	}, d)
}

// choose runs the strategy over hop hi's candidates accepted by keep. A half-open pick must
// win the probe; if it loses, it is dropped and the strategy runs again over the rest.
func (r *Router) choose(ctx context.Context, snap *config.Snapshot, req *Request, now time.Time, s *scratch, hi int, keep func(*candidate) bool, d *Decision) *candidate {
	hp := s.hops[hi]
	s.idx = s.idx[:0]
	for i := hp.first; i < hp.end; i++ {
		c := &s.cands[i]
		s.limitSkip(d, c)
		if keep(c) {
			s.idx = append(s.idx, i)
		}
	}
	single := len(snap.Groups[hp.model].Deployments) == 1
	for len(s.idx) > 0 {
		pos, how := 0, PickSingle
		if !single {
			// A group of one skips selection entirely (behaviour §2.1).
			pos, how = pick(snap.Settings.Strategy, s, r.rand)
		}
		i := s.idx[pos]
		c := &s.cands[i]
		if !r.reserve(ctx, req, now, c, d) {
			// Another decision took the minute's last capacity since the read.
			s.limitSkip(d, c)
			s.drop(pos)
			continue
		}
		if c.block != needsProbe {
			d.Pick = how
			return c
		}
		won, err := r.store.AcquireProbe(ctx, c.dep.ID, req.ID, now, snap.Settings.Circuit.HalfOpenProbe)
		if err != nil {
			r.log.Warn("acquiring a half-open probe failed; passing the deployment over", "deployment", c.dep.ID, "err", err)
		}
		if won {
			d.Pick, d.Probe = how, true
			return c
		}
		r.unreserve(ctx, c.dep.ID, &d.Reserved)
		r.lostProbe(ctx, now, s, i, snap.Settings.Circuit.HalfOpenProbe)
		s.drop(pos)
	}
	return nil
}

// drop removes position pos from s.idx.
func (s *scratch) drop(pos int) {
	s.idx[pos] = s.idx[len(s.idx)-1]
	s.idx = s.idx[:len(s.idx)-1]
}

// limitSkip records c as a limit skip when its limits keep it out of this decision: the
// request's record says why a deployment was passed over (behaviour §9.2, §4.1).
func (s *scratch) limitSkip(d *Decision, c *candidate) {
	if c.block != blockedLimit {
		return
	}
	recordSkip(s.prior, d, Skip{Deployment: c.dep.ID, Model: c.dep.PublicModel, Cause: SkipLimit, Why: limitWhy(c.dep, &c.state.Metrics)})
}

// limitWhy names the limit d reached, as far as the metrics read tell (a reservation that
// failed since saw more than they show).
func limitWhy(d *config.Deployment, m *store.Metrics) string {
	switch {
	case d.TPMLimit == 0 || d.RPMLimit > 0 && m.RPM >= d.RPMLimit:
		return "rpmLimit reached this minute"
	case d.RPMLimit == 0 || d.TPMLimit > 0 && m.TPM >= d.TPMLimit:
		return "tpmLimit reached this minute"
	}
	return "rpmLimit or tpmLimit reached this minute"
}

// reserve takes c's share of its minute before c is chosen (behaviour §4.1: the limits are
// hard, so the check that admits an attempt also counts it, atomically in the store). It
// reports false, with c blocked by its limits until the minute ends, when another decision
// took the last of it. A deployment without limits needs no reservation; a store that fails
// admits the attempt, which then counts at its start (limits soft while the store is down).
func (r *Router) reserve(ctx context.Context, req *Request, now time.Time, c *candidate, d *Decision) bool {
	dep := c.dep
	if dep.RPMLimit == 0 && dep.TPMLimit == 0 {
		return true
	}
	res := store.Reservation{DeploymentID: dep.ID, Now: now, RPMLimit: dep.RPMLimit, TPMLimit: dep.TPMLimit}
	if dep.TPMLimit > 0 {
		res.Tokens = req.Facts.PromptTokens + req.Facts.MaxOutputTokens
	}
	ok, err := r.store.Reserve(ctx, res)
	switch {
	case err != nil:
		r.log.Warn("reserving a deployment's minute failed; its limits are not enforced for this attempt", "deployment", dep.ID, "err", err)
		return true
	case !ok:
		c.block, c.untilAvailable = blockedLimit, nextMinute(now).UnixNano()
		return false
	}
	d.Reserved = store.ReservedTokens{At: now, Tokens: res.Tokens}
	return true
}

// lostProbe re-reads candidate i after another request won its probe, so that this request
// treats it exactly like one arriving a moment later: blocked until the owner's probe ends
// (behaviour §5.4), which a stop reports as Retry-After (behaviour §7.5).
func (r *Router) lostProbe(ctx context.Context, now time.Time, s *scratch, i int, ttl time.Duration) {
	c := &s.cands[i]
	if err := r.store.ReadStates(ctx, now, s.refs[i:i+1], s.states[i:i+1]); err == nil {
		c.state = s.states[i]
		assess(c, now)
	}
	if c.block.usable() {
		// The store still shows a free probe (its owner let it go in between, or the store
		// failed): keep it out of this decision for the probe's TTL anyway.
		c.block, c.untilAvailable = blockedProbe, now.Add(ttl).UnixNano()
	}
}

// attempt fills the decision for an attempt on c after wait.
func (r *Router) attempt(d Decision, snap *config.Snapshot, req *Request, last *Attempt, c *candidate, wait time.Duration) Decision {
	d.Action = ActionAttempt
	d.Deployment = c.dep
	d.Model = c.dep.PublicModel
	d.Wait = wait
	d.Policy = c.dep.Policy(&snap.Settings, req.Operation, req.Mode())
	// The candidate's window (the request's deadline, or the deployment's lower totalMs) less
	// the wait is at least MinAttemptTime: the passes above only accept candidates that fit.
	d.ResponseTimeout = min(d.Policy.Response, c.window-wait)
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

// waitBefore is the wait before asking c again (behaviour §7.2): 0.5 s doubling with every reuse
// of that deployment up to 8 s, never less than retryAfterSeconds nor the provider's
// Retry-After (honoured up to 60 s), plus jitter × 25%; and, unless circuits are ignored,
// never before its failure domain's capacity circuit reopens.
func (r *Router) waitBefore(snap *config.Snapshot, h *History, c *candidate, now time.Time, jitter float64, ignoreCircuits bool) time.Duration {
	w := baseReuseWait(snap, h, c.dep.ID)
	w += time.Duration(float64(w) * JitterFraction * jitter)
	if c.block == blockedCapacity && !ignoreCircuits {
		w = max(w, time.Unix(0, c.untilAvailable).Sub(now))
	}
	return w
}

func baseReuseWait(snap *config.Snapshot, h *History, id string) time.Duration {
	// The backoff doubles per upstream: the k-th reuse of this deployment (behaviour §7.2).
	k := max(h.askedOn(id)-1, 0)
	w := BackoffBase << min(k, 5)
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
