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
}

// hop is one public model of the plan, with its candidates cands[first:end].
type hop struct {
	model      string
	first, end int
}

// decision is one run of Router.Decide, the state its steps share (the Gateway API
// Inference Extension's per-cycle state): the request, its history, the configuration and
// clock reading it decides on, the Decision it builds, and the pooled working slices. It
// lives on Decide's stack and holds copies of the request and history, not pointers: escape
// analysis does not tell its fields apart, so the context it hands the store would take the
// caller's request and history (and a new request's empty history) to the heap with it.
type decision struct {
	r    *Router
	ctx  context.Context
	snap *config.Snapshot
	req  Request
	h    History
	// last is the request's last finished attempt, nil before its first.
	last *Attempt
	now  time.Time
	// left is the time before the request's deadline.
	left time.Duration
	// maxAttempts is the request's attempt budget (behaviour §6.4).
	maxAttempts int
	// ignoreCircuits: the whenAllOpen "try" pass is running (behaviour §7.5).
	ignoreCircuits bool
	// d is the Decision being built.
	d Decision
	*scratch
}

// Decide returns the next action for req given what happened so far (see the package
// documentation for the flow). h may be nil for a new request; Decide never modifies it.
func (r *Router) Decide(ctx context.Context, req *Request, h *History) Decision {
	x := decision{r: r, ctx: ctx, req: *req, now: r.clock.Now(), snap: r.config.Load(), scratch: r.scratch.Get().(*scratch)}
	defer r.scratch.Put(x.scratch)
	if h != nil {
		x.h = *h
	}
	x.last = x.h.Last()
	if e := x.ended(); e != nil {
		return x.stop(e)
	}
	if e := x.spent(); e != nil {
		return x.stop(e)
	}
	x.plan()
	x.readStates()
	x.assess()
	if c, wait := x.firstPass(); c != nil {
		return x.attempt(c, wait)
	}
	if c, wait := x.reuse(); c != nil {
		return x.attempt(c, wait)
	}
	if c, wait := x.allOpen(); c != nil {
		return x.attempt(c, wait)
	}
	return x.stop(x.blocked())
}

// ended starts the decision (its deadline and reason) and returns the stop of a request that
// ends before any plan: no configuration, an unknown model, or a last outcome that ends it
// (behaviour §7.3). A context-window or content-policy refusal switches to that reason's
// chain instead when one exists (behaviour §7.6).
func (x *decision) ended() *StopError {
	if x.snap == nil {
		return &StopError{Status: http.StatusServiceUnavailable, Code: "model_unavailable", Message: "The gateway has no configuration loaded yet."}
	}
	global := x.snap.Settings.Policy(x.req.Operation, x.req.Mode())
	x.d = Decision{Deadline: x.req.Start.Add(global.Total), Reason: x.h.Reason, ReasonFrom: x.h.ReasonFrom}
	x.left, x.maxAttempts = x.d.Deadline.Sub(x.now), global.MaxAttempts
	if _, ok := x.snap.Groups[x.req.Model]; !ok {
		return &StopError{Status: http.StatusNotFound, Code: "model_not_found", Message: "The model `" + x.req.Model + "` does not exist."}
	}
	if x.last == nil {
		return nil
	}
	switch x.last.Class {
	case failure.ClassRequest:
		// Another deployment of the same model would refuse it too (behaviour §7.3); only a
		// dedicated context-window or content-policy chain may take it (behaviour §7.6).
		rs, ok := refusalReason(x.last.Kind)
		if !ok || !x.snap.Policy(x.req.Model).CrossModelFallbackAllowed || chainFor(x.snap, rs, x.last.Model, x.req.Model) == nil {
			return upstreamStop(x.last)
		}
		x.d.Reason, x.d.ReasonFrom = rs, x.last.Model
	case failure.ClassGateway, failure.ClassNone:
		return upstreamStop(x.last)
	}
	return nil
}

// readStates reads the live state of every candidate of every hop in one store call
// (behaviour §3).
func (x *decision) readStates() {
	n := len(x.cands)
	if n == 0 {
		return
	}
	x.states = slices.Grow(x.states[:0], n)[:n]
	if err := x.r.store.ReadStates(x.ctx, x.now, x.refs, x.states); err != nil {
		// Routing must not fail because the shared store did: use neutral state (every
		// circuit closed, no metrics) and say so (docs/design.md, "Store").
		clear(x.states)
		x.d.Degraded = true
		x.r.log.Warn("reading routing state failed; deciding on neutral state", "err", err)
	}
}

// assess gives every candidate its state and decides its blocker (behaviour §4.1, §5).
func (x *decision) assess() {
	for i := range x.cands {
		x.cands[i].state = x.states[i]
		x.cands[i].assess(x.now)
	}
}

// firstPass: the first hop with a deployment this request has not tried yet wins, at once
// (behaviour §7.1); failover comes before fallback because hops are in order (behaviour §7.7).
func (x *decision) firstPass() (*candidate, time.Duration) {
	for _, hi := range x.order {
		if c := x.choose(hi, x.untried); c != nil {
			return c, 0
		}
	}
	return nil, 0
}

// reuse asks a deployment again after the backoff (behaviour §7.2), or after its failure
// domain's capacity circuit reopens, if the wait fits.
func (x *decision) reuse() (*candidate, time.Duration) {
	for _, hi := range x.order {
		if c := x.choose(hi, x.reusable); c != nil {
			return c, x.waitBefore(c, x.r.rand.Float64())
		}
	}
	return nil, 0
}

// allOpen is seed 001's "try the full list anyway", opt-in with whenAllOpen "try"
// (behaviour §7.5): one more pass, hop by hop, that ignores the circuits. A half-open probe
// owned by another request is not a circuit to ignore: exactly one request holds it
// (behaviour §5.4).
func (x *decision) allOpen() (*candidate, time.Duration) {
	if x.snap.Settings.WhenAllOpen != config.WhenAllOpenTry {
		return nil, 0
	}
	x.ignoreCircuits = true
	for _, hi := range x.order {
		if c := x.choose(hi, x.untried); c != nil {
			return c, 0
		}
		if c := x.choose(hi, x.reusable); c != nil {
			return c, x.waitBefore(c, x.r.rand.Float64())
		}
	}
	return nil, 0
}

// untried accepts a deployment this request has not asked yet that can take an attempt now
// (in the all-open pass: that only a circuit keeps out) and whose window fits one.
func (x *decision) untried(c *candidate) bool {
	open := c.block.usable()
	if x.ignoreCircuits {
		open = c.block.byCircuit()
	}
	return !c.tried && open && c.window >= MinAttemptTime
}

// reusable accepts a deployment already tried in this request whose last failure allows
// asking it again and whose wait still fits before its deadline. A deployment whose only
// blocker is its failure domain's capacity circuit, reopening within RetryAfterLimit, is
// waited for (behaviour §7.2).
func (x *decision) reusable(c *candidate) bool {
	if !c.tried || !c.reusable {
		return false
	}
	switch {
	case x.ignoreCircuits:
		if !c.block.byCircuit() {
			return false
		}
	case c.block == blockedCapacity:
		if c.reopensIn(x.now) > RetryAfterLimit {
			return false
		}
	case !c.block.usable():
		return false
	}
	// The wait's upper bound (with full jitter) must leave a meaningful attempt.
	return x.waitBefore(c, 1)+MinAttemptTime <= c.window
}

// choose runs the strategy over hop hi's candidates accepted by keep. A pick with limits must
// reserve its share of the minute and a half-open pick must win the probe; a pick that
// cannot is dropped and the strategy runs again over the rest.
func (x *decision) choose(hi int, keep func(*candidate) bool) *candidate {
	x.collect(hi, keep)
	single := len(x.snap.Groups[x.hops[hi].model].Deployments) == 1
	for len(x.idx) > 0 {
		pos, how := 0, PickSingle
		if !single {
			// A group of one skips selection entirely (behaviour §2.1).
			pos, how = pick(x.snap.Settings.Strategy, x.scratch, x.r.rand)
		}
		c := &x.cands[x.idx[pos]]
		switch {
		case !x.reserve(c):
			// Another decision took the minute's last capacity since the read.
			x.limitSkip(c)
		case c.block != needsProbe:
			x.d.Pick = how
			return c
		case x.winProbe(x.idx[pos]):
			x.d.Pick, x.d.Probe = how, true
			return c
		}
		x.drop(pos)
	}
	return nil
}

// collect sets x.idx to hop hi's candidates accepted by keep, recording the limit skips
// among them.
func (x *decision) collect(hi int, keep func(*candidate) bool) {
	hp := x.hops[hi]
	x.idx = x.idx[:0]
	for i := hp.first; i < hp.end; i++ {
		c := &x.cands[i]
		x.limitSkip(c)
		if keep(c) {
			x.idx = append(x.idx, i)
		}
	}
}

// drop removes position pos from s.idx.
func (s *scratch) drop(pos int) {
	s.idx[pos] = s.idx[len(s.idx)-1]
	s.idx = s.idx[:len(s.idx)-1]
}

// limitSkip records c as a limit skip when its limits keep it out of this decision: the
// request's record says why a deployment was passed over (behaviour §9.2, §4.1).
func (x *decision) limitSkip(c *candidate) {
	if c.block != blockedLimit {
		return
	}
	x.skip(Skip{Deployment: c.dep.ID, Model: c.dep.PublicModel, Cause: SkipLimit, Why: limitWhy(c.dep, &c.state.Metrics)})
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
func (x *decision) reserve(c *candidate) bool {
	dep := c.dep
	if dep.RPMLimit == 0 && dep.TPMLimit == 0 {
		return true
	}
	res := store.Reservation{DeploymentID: dep.ID, Now: x.now, RPMLimit: dep.RPMLimit, TPMLimit: dep.TPMLimit}
	if dep.TPMLimit > 0 {
		res.Tokens = x.req.Facts.PromptTokens + x.req.Facts.MaxOutputTokens
	}
	ok, err := x.r.store.Reserve(x.ctx, res)
	switch {
	case err != nil:
		x.r.log.Warn("reserving a deployment's minute failed; its limits are not enforced for this attempt", "deployment", dep.ID, "err", err)
		return true
	case !ok:
		c.block, c.untilAvailable = blockedLimit, nextMinute(x.now).UnixNano()
		return false
	}
	x.d.Reserved = store.ReservedTokens{At: x.now, Tokens: res.Tokens}
	return true
}

// winProbe asks the store for candidate i's half-open probe (behaviour §5.4). A lost probe
// gives the reservation back and leaves the candidate blocked for this decision.
func (x *decision) winProbe(i int) bool {
	c := &x.cands[i]
	ttl := x.snap.Settings.Circuit.HalfOpenProbe
	won, err := x.r.store.AcquireProbe(x.ctx, c.dep.ID, x.req.ID, x.now, ttl)
	if err != nil {
		x.r.log.Warn("acquiring a half-open probe failed; passing the deployment over", "deployment", c.dep.ID, "err", err)
	}
	if !won {
		x.r.unreserve(x.ctx, c.dep.ID, &x.d.Reserved)
		x.lostProbe(i, ttl)
	}
	return won
}

// lostProbe re-reads candidate i after another request won its probe, so that this request
// treats it exactly like one arriving a moment later: blocked until the owner's probe ends
// (behaviour §5.4), which a stop reports as Retry-After (behaviour §7.5).
func (x *decision) lostProbe(i int, ttl time.Duration) {
	c := &x.cands[i]
	if err := x.r.store.ReadStates(x.ctx, x.now, x.refs[i:i+1], x.states[i:i+1]); err == nil {
		c.state = x.states[i]
		c.assess(x.now)
	}
	if c.block.usable() {
		// The store still shows a free probe (its owner let it go in between, or the store
		// failed): keep it out of this decision for the probe's TTL anyway.
		c.block, c.untilAvailable = blockedProbe, x.now.Add(ttl).UnixNano()
	}
}

// attempt completes the decision for an attempt on c after wait.
func (x *decision) attempt(c *candidate, wait time.Duration) Decision {
	d := &x.d
	d.Action = ActionAttempt
	d.Deployment = c.dep
	d.Model = c.dep.PublicModel
	d.Wait = wait
	d.Policy = c.dep.Policy(&x.snap.Settings, x.req.Operation, x.req.Mode())
	// The candidate's window (the request's deadline, or the deployment's lower totalMs) less
	// the wait is at least MinAttemptTime: the passes above only accept candidates that fit.
	d.ResponseTimeout = min(d.Policy.Response, c.window-wait)
	d.AllOpenTry = x.ignoreCircuits
	switch {
	case x.last == nil:
		d.Move = MoveFirst
	case c.tried:
		d.Move = MoveRetry
	case c.dep.PublicModel == x.last.Model || c.dep.PublicModel == x.req.Model:
		d.Move = MoveFailover
	default:
		d.Move = MoveFallback
	}
	d.FallbackHop = x.h.hopOf(d.Model, x.req.Model)
	return *d
}

// waitBefore is the wait before asking c again (behaviour §7.2): 0.5 s doubling with every reuse
// of that deployment up to 8 s, never less than retryAfterSeconds nor the provider's
// Retry-After (honoured up to 60 s), plus jitter × 25%; and, unless circuits are ignored,
// never before its failure domain's capacity circuit reopens.
func (x *decision) waitBefore(c *candidate, jitter float64) time.Duration {
	w := baseReuseWait(x.snap, &x.h, c.dep.ID)
	w += time.Duration(float64(w) * JitterFraction * jitter)
	if c.block == blockedCapacity && !x.ignoreCircuits {
		w = max(w, c.reopensIn(x.now))
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

// stop completes the decision as a stop with e.
func (x *decision) stop(e *StopError) Decision {
	x.d.Action = ActionStop
	x.d.Stop = e
	return x.d
}
