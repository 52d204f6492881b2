package routing

import (
	"context"
	"fmt"
	"time"

	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// StartAttempt records that an attempt on d begins now: in flight until it finishes or its
// deadline (plus a grace period) passes (behaviour §3.1), and one more request this minute
// (behaviour §3.2) unless the decision already counted it (reserved, its Decision.Reserved).
// attemptID must be unique per attempt. It records even when ctx is cancelled (see record).
func (r *Router) StartAttempt(ctx context.Context, d *config.Deployment, attemptID string, deadline time.Time, reserved store.ReservedTokens) error {
	ctx, cancel := r.record(ctx)
	defer cancel()
	now := r.clock.Now()
	if err := r.store.StartAttempt(ctx, store.AttemptStart{
		DeploymentID: d.ID, AttemptID: attemptID, Now: now, Expires: deadline.Add(inFlightGrace),
		Reserved: !reserved.At.IsZero(),
	}); err != nil {
		return fmt.Errorf("recording the start of attempt %s on %s: %w", attemptID, d.ID, err)
	}
	return nil
}

// Unreserve gives back the share of its deployment's minute that d reserved, for an attempt
// that will not be made (the client left during the wait, the move could not be sent). It
// records even when ctx is cancelled (see record).
func (r *Router) Unreserve(ctx context.Context, d *Decision) {
	if d.Deployment != nil {
		r.unreserve(ctx, d.Deployment.ID, &d.Reserved)
	}
}

// unreserve gives back what *res reserved on deployment id and clears it.
func (r *Router) unreserve(ctx context.Context, id string, res *store.ReservedTokens) {
	if res.At.IsZero() {
		return
	}
	ctx, cancel := r.record(ctx)
	defer cancel()
	if err := r.store.Unreserve(ctx, store.Reservation{DeploymentID: id, Now: res.At, Tokens: res.Tokens}); err != nil {
		r.log.Warn("giving back a reservation failed; it lapses with its minute", "deployment", id, "err", err)
	}
	*res = store.ReservedTokens{}
}

// record returns the context an attempt's books are written under: ctx's values without its
// cancellation, bounded by RecordTimeout. The books belong to the attempt, not to the
// caller: the ext_proc attempt role finishes an attempt exactly when its stream is
// cancelled, and an outcome dropped then would leave the in-flight entry behind until it
// expires, or (through redisstore.Resilient, which takes a cancelled caller for one that
// gave up) reach only this replica's memory.
func (r *Router) record(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), r.recordTimeout)
}

// Result is what an attempt produced, for the books.
type Result struct {
	// Started is when the attempt started (Router.Now just before StartAttempt). A failure of
	// an attempt that started before the circuit's last transition (a probe closing it, its
	// opening, the end of its cooldown) changes nothing (behaviour §5.5). Zero means unknown: the
	// failure then counts as if the attempt had started after the transition.
	Started        time.Time
	Classification failure.Classification
	// Latency: from just before the upstream call until the upstream finished responding;
	// for streams, the last upstream chunk (behaviour §3.3).
	Latency          time.Duration
	CompletionTokens int64
	TotalTokens      int64
	// Reserved is the decision's reservation (Decision.Reserved): its token estimate gives
	// way to TotalTokens.
	Reserved store.ReservedTokens
}

// FinishAttempt ends an attempt on d of request req: it releases the in-flight entry and
// applies the outcome's effect to metrics and circuits (behaviour §3, §5, §7.3). It must be called
// exactly once per started attempt, whatever the outcome, cancels included; it records even
// when ctx is cancelled (see record).
func (r *Router) FinishAttempt(ctx context.Context, req *Request, d *config.Deployment, attemptID string, res Result) (store.Transition, error) {
	ctx, cancel := r.record(ctx)
	defer cancel()
	snap := r.config.Load()
	now := r.clock.Now()
	f := store.AttemptFinish{
		DeploymentID:     d.ID,
		Domain:           d.Domain,
		AttemptID:        attemptID,
		RequestID:        req.ID,
		Started:          res.Started,
		Now:              now,
		Effect:           EffectOf(res.Classification),
		Latency:          res.Latency,
		CompletionTokens: res.CompletionTokens,
		TotalTokens:      res.TotalTokens,
		Reserved:         res.Reserved,
		RetryAfter:       res.Classification.RetryAfter,
		Jitter:           r.rand.Float64(),
	}
	if snap != nil {
		f.Settings = snap.Settings.Circuit
		total := snap.Settings.Policy(req.Operation, req.Mode()).Total
		f.DedupeTTL = max(req.Start.Add(total).Sub(now), time.Minute)
	}
	t, err := r.store.FinishAttempt(ctx, f)
	if err != nil {
		return t, fmt.Errorf("recording the outcome of attempt %s on %s: %w", attemptID, d.ID, err)
	}
	r.log.Debug("attempt finished", "request", req.ID, "deployment", d.ID, "effect", f.Effect.String(),
		"class", res.Classification.Class.String(), "kind", string(res.Classification.Kind),
		"opened", t.Opened, "reopened", t.Reopened, "closed", t.Closed, "quarantined", t.Quarantined, "capacity", t.CapacityOpened,
		"probe_released", t.ProbeReleased)
	return t, nil
}

// EffectOf maps a failure class to its effect on shared state (behaviour §7.3).
func EffectOf(c failure.Classification) store.Effect {
	switch c.Class {
	case failure.ClassNone:
		return store.EffectSuccess
	case failure.ClassTransient:
		return store.EffectTransient
	case failure.ClassThrottle:
		if c.Quota {
			return store.EffectQuota
		}
		return store.EffectThrottle
	case failure.ClassConfiguration:
		return store.EffectConfiguration
	default:
		// Request faults, gateway errors, cancels and incompatibility penalise nobody.
		return store.EffectNeutral
	}
}
