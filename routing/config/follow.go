package config

import (
	"context"
	"log/slog"
	"time"

	"github.com/switchyard-gw/switchyard/internal/clock"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// Follower keeps a Live in step with a config store by version. Notifications are only a
// hint: each version is announced once, and a reload that fails then (the store was slow, a
// connection broke) must not leave the replica behind until the next change. So the follower
// remembers the newest version announced or polled, and reloads, retrying with backoff,
// until the version in force has caught up with it; it also reads the version every
// PollInterval in case an announcement never came.
type Follower struct {
	// Clock times the retries and polls; the system clock when nil.
	Clock clock.Clock
	// PollInterval is how often the store's version is read (default 5 s).
	PollInterval time.Duration
	// MinBackoff and MaxBackoff bound the wait between failed reloads (default 250 ms,
	// doubling to 10 s).
	MinBackoff, MaxBackoff time.Duration
	// Logger receives a warning per failed reload; discarded when nil.
	Logger *slog.Logger
}

// Default values of Follower.
const (
	DefaultFollowPollInterval = 5 * time.Second
	DefaultFollowMinBackoff   = 250 * time.Millisecond
	DefaultFollowMaxBackoff   = 10 * time.Second
)

func (f Follower) withDefaults() Follower {
	if f.Clock == nil {
		f.Clock = clock.System{}
	}
	if f.PollInterval <= 0 {
		f.PollInterval = DefaultFollowPollInterval
	}
	if f.MinBackoff <= 0 {
		f.MinBackoff = DefaultFollowMinBackoff
	}
	if f.MaxBackoff < f.MinBackoff {
		f.MaxBackoff = max(DefaultFollowMaxBackoff, f.MinBackoff)
	}
	if f.Logger == nil {
		f.Logger = slog.New(slog.DiscardHandler)
	}
	return f
}

// Run follows cs into l until ctx is done or the store's watch channel closes.
func (f Follower) Run(ctx context.Context, l *Live, cs store.ConfigStore, v *Validator) {
	f = f.withDefaults()
	watch := cs.WatchConfig(ctx)
	poll := f.Clock.After(f.PollInterval)
	var (
		target  uint64           // newest version announced or polled
		retry   <-chan time.Time // pending retry after a failed reload; nil when none
		backoff = f.MinBackoff
	)
	for {
		select {
		case <-ctx.Done():
			return
		case ver, ok := <-watch:
			if !ok {
				return
			}
			if ver > target {
				target = ver
				retry = nil // a newer version may load where the older failed: try now
			}
		case <-poll:
			poll = f.Clock.After(f.PollInterval)
			ver, err := cs.ConfigVersion(ctx)
			if err != nil {
				// Debug: an unreachable store is reported by the store itself; the next
				// poll tries again.
				f.Logger.Debug("configuration version poll failed", "err", err)
				continue
			}
			target = max(target, ver)
		case <-retry:
			retry = nil
		}
		if retry != nil || loaded(l) >= target {
			continue
		}
		err := l.Reload(ctx, cs, v)
		if ctx.Err() != nil {
			return
		}
		if err == nil && loaded(l) >= target {
			backoff = f.MinBackoff
			continue
		}
		if err != nil {
			f.Logger.Warn("configuration reload failed; keeping the current configuration and retrying",
				"err", err, "in_force", loaded(l), "announced", target, "retry_in", backoff)
		}
		// Without an error the store answered an older version than announced (a replica
		// read before the write reached it): try again too.
		retry = f.Clock.After(backoff)
		backoff = min(2*backoff, f.MaxBackoff)
	}
}

// loaded is the version in force (0 before any).
func loaded(l *Live) uint64 {
	if s := l.Load(); s != nil {
		return s.Version
	}
	return 0
}
