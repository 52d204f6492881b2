package routing

import (
	"context"
	"fmt"
	"time"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// DeploymentStatus is one deployment as GET /v1/models/{model}/deployments reports it
// (SPEC §10.3, §5.8).
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
}

// Status reports the deployments of a public model. ok is false for an unknown model. The
// state is the decision's own eligibility (assess), so the report never disagrees with
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
	now := r.clock.Now()
	states := make([]store.DeploymentState, len(g.Refs))
	if err := r.store.ReadStates(ctx, now, g.Refs, states); err != nil {
		return nil, true, fmt.Errorf("reading the state of %s: %w", model, err)
	}
	out := make([]DeploymentStatus, len(g.Deployments))
	for i, d := range g.Deployments {
		ds := DeploymentStatus{ID: d.ID, Enabled: d.Enabled}
		if !d.Enabled {
			ds.State = "disabled"
			out[i] = ds
			continue
		}
		c := candidate{dep: d, state: states[i]}
		assess(&c, now)
		ds.State, ds.Cause = c.block.report(&c.state)
		if c.untilAvailable > 0 {
			ds.RetryAfterMs = ceilMs(time.Unix(0, c.untilAvailable).Sub(now))
		}
		out[i] = ds
	}
	return out, true, nil
}

// report names a blocker as SPEC §5.8 states and a cause.
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
		// Over its own limits this minute (SPEC §4.1): skipped until the minute ends.
		return "rate_limited", "limit"
	default:
		return "available", ""
	}
}

func ceilMs(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
