package routing

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// DeploymentStatus is one deployment as GET /v1/models/{model}/deployments reports it
// (behaviour §10.3, §5.8).
type DeploymentStatus struct {
	ID      string `json:"id"`
	Enabled bool   `json:"enabled"`
	// State is available, cooldown, half_open, rate_limited, or disabled for a deployment
	// switched off by its kill switch.
	State        string `json:"state"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	// Cause says why it is not available: transient or configuration for a circuit;
	// throttle, quota or limit for rate_limited.
	Cause string `json:"cause,omitempty"`
	// Circuit is the deployment's own circuit (behaviour §5): one of CircuitStates. The
	// failure domain's capacity circuit and the minute's limits show in State instead.
	Circuit string `json:"circuit"`
	// InFlight counts the attempts in flight on the deployment, on every replica sharing
	// the store (behaviour §3.1).
	InFlight int64 `json:"in_flight"`
}

// The values of DeploymentStatus.Circuit.
const (
	CircuitClosed = "closed"
	// CircuitOpen: open after transient failures, cooldown not over (behaviour §5.1).
	CircuitOpen = "open"
	// CircuitHalfOpen: the cooldown is over; the probe is free or taken (behaviour §5.4).
	CircuitHalfOpen = "half_open"
	// CircuitQuarantined: open after a configuration failure (behaviour §5.6).
	CircuitQuarantined = "quarantined"
	// CircuitDisabled: switched off by the kill switch.
	CircuitDisabled = "disabled"
)

// CircuitStates lists the values of DeploymentStatus.Circuit.
func CircuitStates() []string {
	return []string{CircuitClosed, CircuitOpen, CircuitHalfOpen, CircuitQuarantined, CircuitDisabled}
}

// Status reports the deployments of a public model. ok is false for an unknown model. The
// state is the decision's own eligibility (candidate.assess), so the report never disagrees with
// routing.
func (r *Router) Status(ctx context.Context, model string) (statuses []DeploymentStatus, ok bool, err error) {
	snap := r.config.Load()
	if snap == nil {
		return nil, false, nil
	}
	g := snap.Groups[model]
	if g == nil {
		return nil, false, nil
	}
	out, err := r.statuses(ctx, g.Deployments, g.Refs)
	if err != nil {
		return nil, true, fmt.Errorf("reading the state of %s: %w", model, err)
	}
	return out, true, nil
}

// Deployments reports every deployment of the configuration in force, by id, with one
// read of the store: what the metrics show at each scrape, the same on every replica.
func (r *Router) Deployments(ctx context.Context) ([]DeploymentStatus, error) {
	snap := r.config.Load()
	if snap == nil {
		return nil, nil
	}
	deps := make([]*config.Deployment, 0, len(snap.Deployments))
	for _, d := range snap.Deployments {
		deps = append(deps, d)
	}
	slices.SortFunc(deps, func(a, b *config.Deployment) int { return strings.Compare(a.ID, b.ID) })
	refs := make([]store.DeploymentRef, len(deps))
	for i, d := range deps {
		refs[i] = d.Ref()
	}
	out, err := r.statuses(ctx, deps, refs)
	if err != nil {
		return nil, fmt.Errorf("reading the deployments' state: %w", err)
	}
	return out, nil
}

// statuses reads refs (refs[i] is deps[i]'s) and reports each deployment at now.
func (r *Router) statuses(ctx context.Context, deps []*config.Deployment, refs []store.DeploymentRef) ([]DeploymentStatus, error) {
	now := r.clock.Now()
	states := make([]store.DeploymentState, len(refs))
	if err := r.store.ReadStates(ctx, now, refs, states); err != nil {
		return nil, err
	}
	out := make([]DeploymentStatus, len(deps))
	for i, d := range deps {
		st := &states[i]
		ds := DeploymentStatus{ID: d.ID, Enabled: d.Enabled, InFlight: st.Metrics.InFlight, Circuit: circuitOf(d, st, now)}
		if !d.Enabled {
			ds.State = "disabled"
			out[i] = ds
			continue
		}
		c := candidate{dep: d, state: *st}
		c.assess(now)
		ds.State, ds.Cause = c.block.report(&c.state)
		if c.untilAvailable > 0 {
			ds.RetryAfterMs = ceilMs(c.reopensIn(now))
		}
		out[i] = ds
	}
	return out, nil
}

// circuitOf names d's circuit at now (one of CircuitStates).
func circuitOf(d *config.Deployment, st *store.DeploymentState, now time.Time) string {
	if !d.Enabled {
		return CircuitDisabled
	}
	switch st.Circuit.State(now) {
	case store.StateCooldown:
		if st.Circuit.Cause == store.CauseConfiguration {
			return CircuitQuarantined
		}
		return CircuitOpen
	case store.StateHalfOpen, store.StateProbing:
		return CircuitHalfOpen
	}
	return CircuitClosed
}

// report names a blocker as behaviour §5.8 states and a cause.
func (b blocker) report(st *store.DeploymentState) (state, cause string) {
	switch b {
	case needsProbe, blockedProbe:
		return "half_open", st.Circuit.Cause.String()
	case blockedCooldown, blockedQuarantine:
		return "cooldown", st.Circuit.Cause.String()
	case blockedCapacity:
		return "rate_limited", "throttle"
	case blockedQuota:
		return "rate_limited", "quota"
	case blockedLimit:
		// Over its own limits this minute (behaviour §4.1): skipped until the minute ends.
		return "rate_limited", "limit"
	default:
		return "available", ""
	}
}

func ceilMs(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
