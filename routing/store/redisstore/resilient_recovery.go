package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// fail records a failed Redis call. Only an unreachable or slow Redis (store.ErrUnavailable)
// degrades the wrapper; a call that failed because its caller gave up (the client went away,
// the request's deadline passed) says nothing about Redis and is not counted as a Redis
// error either, and any other error (a malformed record, a script bug) is logged but would
// not go away by waiting.
func (r *Resilient) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	r.m.errors.Inc()
	if !errors.Is(err, store.ErrUnavailable) {
		r.cfg.Logger.Error("redis store call failed", "err", err)
		return
	}
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	r.status.LastError = err.Error()
	if r.status.Degraded {
		r.mu.Unlock()
		return
	}
	r.status.Degraded = true
	r.status.Since = now
	r.backoff = r.cfg.MinBackoff
	r.lastWarn = now
	r.localOps = 0
	r.degraded.Store(true)
	r.mu.Unlock()

	r.m.degraded.Set(1)
	r.m.degradations.Inc()
	r.cfg.Logger.Warn("redis unreachable: routing on process-local state until it answers again",
		"err", err, "retry_in", r.cfg.MinBackoff)
	select {
	case r.kick <- struct{}{}:
	default: // the loop is already awake
	}
}

// servedLocally counts a call served by the local store and repeats the outage warning at
// most once per LogInterval.
func (r *Resilient) servedLocally(op string) {
	r.m.localOps.WithLabelValues(op).Inc()
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	r.localOps++
	if !r.status.Degraded || now.Sub(r.lastWarn) < r.cfg.LogInterval {
		r.mu.Unlock()
		return
	}
	r.lastWarn = now
	n, since, lastErr := r.localOps, r.status.Since, r.status.LastError
	r.localOps = 0
	r.mu.Unlock()
	r.cfg.Logger.Warn("redis still unreachable: routing on process-local state",
		"since", since, "local_operations", n, "err", lastErr)
}

// recoveryLoop sleeps until the wrapper degrades, then checks Redis after each backoff
// until it answers and the wrapper is back on Redis.
func (r *Resilient) recoveryLoop() {
	defer r.wg.Done()
	for {
		select {
		case <-r.bg.Done():
			return
		case <-r.kick:
		}
		for r.degraded.Load() {
			r.mu.Lock()
			wait := r.backoff
			r.mu.Unlock()
			select {
			case <-r.bg.Done():
				return
			case <-r.cfg.Clock.After(wait):
			}
			if r.tryRecover() {
				break
			}
			r.mu.Lock()
			r.backoff = min(2*r.backoff, r.cfg.MaxBackoff)
			r.mu.Unlock()
		}
	}
}

// tryRecover PINGs Redis; when it answers, replays the queued releases, switches routing
// back to Redis and tells config watchers about the version found there.
func (r *Resilient) tryRecover() bool {
	if err := r.remote.Ping(r.bg); err != nil {
		r.m.checks.WithLabelValues("failed").Inc()
		r.mu.Lock()
		r.status.LastError = err.Error()
		r.mu.Unlock()
		return false
	}
	r.m.checks.WithLabelValues("ok").Inc()
	replayed := 0
	for {
		r.mu.Lock()
		q := r.queue
		r.queue = nil
		if len(q) == 0 {
			// Switch back under the lock: a release queued from now on sees the wrapper
			// healthy and goes to Redis directly (queueRelease), so none is stranded.
			since := r.status.Since
			r.status.Degraded = false
			r.status.Since = time.Time{}
			r.degraded.Store(false)
			r.mu.Unlock()
			r.m.degraded.Set(0)
			r.m.queued.Set(0)
			r.cfg.Logger.Info("redis reachable again: routing on shared state",
				"outage", r.cfg.Clock.Now().Sub(since), "replayed_releases", replayed)
			break
		}
		r.mu.Unlock()
		if err := r.remote.releaseAttempts(r.bg, q); err != nil {
			r.mu.Lock()
			r.queue = append(q, r.queue...)
			r.status.LastError = err.Error()
			r.mu.Unlock()
			r.m.checks.WithLabelValues("failed").Inc()
			return false
		}
		replayed += len(q)
		r.m.replayed.Add(float64(len(q)))
	}
	// The version may have moved while notifications could not arrive.
	if v, err := r.remote.ConfigVersion(r.bg); err == nil {
		r.notify(v)
	}
	return true
}

// queueRelease keeps an in-flight release for Redis. When the wrapper is (again) healthy it
// is sent at once instead, so nothing waits in the queue without an outage to end it.
func (r *Resilient) queueRelease(ctx context.Context, rel release) {
	r.mu.Lock()
	if r.status.Degraded {
		if len(r.queue) >= r.cfg.MaxQueuedReleases {
			r.mu.Unlock()
			r.m.dropped.Inc()
			return
		}
		r.queue = append(r.queue, rel)
		n := len(r.queue)
		r.mu.Unlock()
		r.m.queued.Set(float64(n))
		return
	}
	r.mu.Unlock()
	// The release belongs to the attempt, not to the caller's request: a cancelled request
	// must not strand it (the call stays bounded by the operation timeout).
	ctx = context.WithoutCancel(ctx)
	if err := r.remote.releaseAttempts(ctx, []release{rel}); err != nil {
		r.fail(ctx, err) // releaseAttempts only fails with ErrUnavailable: this degrades
		r.mu.Lock()
		r.queue = append(r.queue, rel)
		n := len(r.queue)
		r.mu.Unlock()
		r.m.queued.Set(float64(n))
	}
}

// trackLocal remembers an attempt started on the local store, so its end releases it
// there. Entries whose attempt never ended are swept once past their expiry.
func (r *Resilient) trackLocal(a store.AttemptStart, maybeRemote bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.localAttempts[a.AttemptID] = localAttempt{expires: a.Expires, maybeRemote: maybeRemote}
	if len(r.localAttempts) < r.sweepAt {
		return
	}
	for id, la := range r.localAttempts {
		if !a.Now.Before(la.expires) {
			delete(r.localAttempts, id)
		}
	}
	r.sweepAt = max(1024, 2*len(r.localAttempts))
}

func (r *Resilient) untrackLocal(attemptID string) (localAttempt, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	la, ok := r.localAttempts[attemptID]
	if ok {
		delete(r.localAttempts, attemptID)
	}
	return la, ok
}

// releaseLocal ends a locally started attempt whose outcome went to Redis.
func (r *Resilient) releaseLocal(ctx context.Context, f store.AttemptFinish) {
	f.Effect = store.EffectNeutral
	_, _ = r.local.FinishAttempt(ctx, f) // the memory store cannot fail
}
