package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/switchyard-gw/switchyard/internal/clock"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// Guard keeps a shared store from forking the configuration when it loses it. A Redis that
// restarts without persistence (or fails over to a replica that lagged) comes back with no
// configuration, or an older one, at a lower version. The replicas keep serving what they
// loaded, since Live never installs an older version; but the admin API would build its next
// writes on the empty store, and once their versions passed the one in force every replica
// would load a configuration without the deployments it had.
//
// So the guard reads the store's version every PollInterval (and at once when the admin API
// found the store behind): when it is below the version in force, it logs the event once,
// counts it, and puts the configuration in force back with store.RestoreConfig at that very
// version, so later writes continue from it. The file is not used: it may be older than what
// the fleet serves. RestoreConfig writes only while the store is still behind, so of the
// replicas that race to restore, the one serving the highest version wins and the others
// follow it. Until the store holds the configuration in force again, Writable refuses admin
// writes.
type Guard struct {
	live  *Live
	store GuardStore
	opts  GuardOptions
	kick  chan struct{}

	mu     sync.Mutex
	status GuardStatus
	warned bool // a restore failure of the current event was logged
}

// GuardStore is what the guard needs of the configuration store.
type GuardStore interface {
	ConfigVersion(ctx context.Context) (uint64, error)
	RestoreConfig(ctx context.Context, version uint64, cfg *configv1.Config) (uint64, bool, error)
}

// GuardOptions configure a Guard. The zero value works.
type GuardOptions struct {
	// Clock defaults to the system clock.
	Clock clock.Clock
	// PollInterval is how often the store's version is read (default 1 s).
	PollInterval time.Duration
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
	// Count is told of every event (the Guard* constants); nil counts nothing. The binary
	// turns it into switchyard_config_store_events_total{event}.
	Count func(event string)
}

// Events of GuardOptions.Count.
const (
	// GuardBehind: the store's version was found below the one in force (once per event).
	GuardBehind = "behind"
	// GuardRestored: this replica put the configuration in force back.
	GuardRestored = "restored"
	// GuardCaughtUp: the store holds the configuration in force (or a newer one) again
	// without this replica's restore: another replica restored it first.
	GuardCaughtUp = "caught_up"
	// GuardRestoreFailed: a restore call failed (the store was unreachable again); retried.
	GuardRestoreFailed = "restore_failed"
)

// DefaultGuardPollInterval is GuardOptions.PollInterval's default.
const DefaultGuardPollInterval = time.Second

// GuardStatus is what readiness reports.
type GuardStatus struct {
	// Behind: the store holds an older configuration than the one in force (or none).
	Behind bool
	// Stored and Served are the versions of the store and in force when Behind was found.
	Stored, Served uint64
	// Since is when Behind was found.
	Since time.Time
}

// StoreBehindError is Writable's refusal.
type StoreBehindError struct {
	Stored, Served uint64
}

func (e *StoreBehindError) Error() string {
	return fmt.Sprintf("the configuration store holds version %d, older than version %d in force; it is being restored", e.Stored, e.Served)
}

// ErrStoreBehind matches a *StoreBehindError with errors.Is.
var ErrStoreBehind = errors.New("configuration store behind the configuration in force")

// Is makes errors.Is(err, ErrStoreBehind) hold.
func (e *StoreBehindError) Is(target error) bool { return target == ErrStoreBehind }

// NewGuard returns a guard of l's configuration in cs; Run starts it.
func NewGuard(l *Live, cs GuardStore, opts GuardOptions) *Guard {
	if opts.Clock == nil {
		opts.Clock = clock.System{}
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultGuardPollInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Count == nil {
		opts.Count = func(string) {}
	}
	return &Guard{live: l, store: cs, opts: opts, kick: make(chan struct{}, 1)}
}

// Run checks the store every PollInterval, and when Writable asks, until ctx is done.
func (g *Guard) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.kick:
		case <-g.opts.Clock.After(g.opts.PollInterval):
		}
		g.Check(ctx)
	}
}

// Status reports whether the store is behind the configuration in force.
func (g *Guard) Status() GuardStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.status
}

// Writable is the admin API's gate: it returns a *StoreBehindError when storeVersion, the
// version a write just read from the store, is below the configuration in force (a write
// built on it would fork the configuration), and wakes the guard to restore it now.
func (g *Guard) Writable(storeVersion uint64) error {
	snap := g.live.Load()
	if snap == nil || storeVersion >= snap.Version {
		return nil
	}
	select {
	case g.kick <- struct{}{}:
	default: // already woken
	}
	return &StoreBehindError{Stored: storeVersion, Served: snap.Version}
}

// Check compares the store's version with the one in force once, and restores the store
// when it is behind.
func (g *Guard) Check(ctx context.Context) {
	snap := g.live.Load()
	if snap == nil || snap.Version == 0 {
		// A configuration file in force (the store could not be read at start): nothing of
		// the store's to restore; seeding covers an empty store then.
		return
	}
	stored, err := g.store.ConfigVersion(ctx)
	if err != nil {
		// The store reports its own outages, rate limited.
		g.opts.Logger.Debug("configuration guard: version read failed", "err", err)
		return
	}
	if stored >= snap.Version {
		g.caughtUp(stored, GuardCaughtUp)
		return
	}
	g.behind(stored, snap.Version)
	v, restored, err := g.store.RestoreConfig(ctx, snap.Version, snap.Source())
	if err != nil {
		g.opts.Count(GuardRestoreFailed)
		g.restoreFailed(err)
		return
	}
	event := GuardCaughtUp
	if restored {
		event = GuardRestored
	}
	g.caughtUp(v, event)
}

// behind records that the store is behind; the first check of an event logs and counts it.
func (g *Guard) behind(stored, served uint64) {
	g.mu.Lock()
	if g.status.Behind {
		g.mu.Unlock()
		return
	}
	g.status = GuardStatus{Behind: true, Stored: stored, Served: served, Since: g.opts.Clock.Now()}
	g.warned = false
	g.mu.Unlock()
	g.opts.Count(GuardBehind)
	g.opts.Logger.Error("configuration store lost the configuration in force (a Redis restarted empty, or failed over to a stale replica): "+
		"restoring it from the configuration this replica serves; admin writes are refused until the store holds it again",
		"store_version", stored, "served_version", served)
}

// caughtUp ends an event: the store holds version v, at least the one in force.
func (g *Guard) caughtUp(v uint64, event string) {
	g.mu.Lock()
	st := g.status
	g.status = GuardStatus{}
	g.mu.Unlock()
	if !st.Behind {
		return
	}
	g.opts.Count(event)
	how := "restored by this replica"
	if event != GuardRestored {
		how = "restored by another replica"
	}
	g.opts.Logger.Info("configuration store holds the configuration in force again: "+how+"; admin writes accepted",
		"version", v, "behind_for", g.opts.Clock.Now().Sub(st.Since))
}

// restoreFailed logs the first failure of an event that is not an outage (the store reports
// those itself), and the rest at debug: the next check retries.
func (g *Guard) restoreFailed(err error) {
	g.mu.Lock()
	first := !g.warned && !errors.Is(err, store.ErrUnavailable)
	g.warned = g.warned || first
	g.mu.Unlock()
	if first {
		g.opts.Logger.Warn("configuration guard: restoring the store failed; retrying", "err", err)
		return
	}
	g.opts.Logger.Debug("configuration guard: restoring the store failed; retrying", "err", err)
}
