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
	// State is available, cooldown, half_open or rate_limited.
	State        string `json:"state"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	// Cause says why a circuit is open: transient, configuration or quota.
	Cause string `json:"cause,omitempty"`
}

// Status reports the deployments of a public model. ok is false for an unknown model.
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
		st := &states[i]
		ds := DeploymentStatus{ID: d.ID, Enabled: d.Enabled, State: "available"}
		switch st.Circuit.State(now) {
		case store.StateCooldown:
			ds.State, ds.Cause = "cooldown", st.Circuit.Cause.String()
			ds.RetryAfterMs = ceilMs(st.Circuit.RetryAfter(now))
		case store.StateHalfOpen, store.StateProbing:
			ds.State, ds.Cause = "half_open", st.Circuit.Cause.String()
			ds.RetryAfterMs = ceilMs(st.Circuit.RetryAfter(now))
		}
		switch {
		case ds.State != "available":
		case st.Capacity.Limited(now):
			ds.State, ds.Cause = "rate_limited", "throttle"
			if st.Capacity.Quota {
				ds.Cause = "quota"
			}
			ds.RetryAfterMs = ceilMs(st.Capacity.Until.Sub(now))
		case overLimit(d, &st.Metrics):
			// Over its own limits this minute (SPEC §4.1): skipped until the minute ends.
			ds.State, ds.Cause = "rate_limited", "limit"
			ds.RetryAfterMs = ceilMs(nextMinute(now).Sub(now))
		}
		out[i] = ds
	}
	return out, true, nil
}

func ceilMs(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
