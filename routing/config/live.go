package config

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// Live holds the snapshot in force. Readers never block writers: a new configuration is
// compiled aside and swapped in atomically.
type Live struct {
	p atomic.Pointer[Snapshot]
}

// NewLive returns a Live holding s.
func NewLive(s *Snapshot) *Live {
	l := &Live{}
	l.p.Store(s)
	return l
}

// Load returns the snapshot in force (nil before the first Store).
func (l *Live) Load() *Snapshot { return l.p.Load() }

// Store swaps in s.
func (l *Live) Store(s *Snapshot) { l.p.Store(s) }

// Reload loads, validates and compiles the store's configuration and swaps it in. A
// configuration that no longer validates (written by a newer or buggy replica) is refused and
// the current snapshot stays in force.
func (l *Live) Reload(ctx context.Context, cs store.ConfigStore, v *Validator) error {
	cur, err := cs.LoadConfig(ctx)
	if err != nil {
		return fmt.Errorf("loading configuration: %w", err)
	}
	if old := l.Load(); old != nil && old.Version == cur.Version && cur.Version != 0 {
		return nil
	}
	if err := v.Config(cur.Config); err != nil {
		return fmt.Errorf("configuration version %d: %w", cur.Version, err)
	}
	snap, err := Compile(cur.Version, cur.Config, cur.Secrets)
	if err != nil {
		return fmt.Errorf("compiling configuration version %d: %w", cur.Version, err)
	}
	l.Store(snap)
	return nil
}

// Follow keeps l in step with the store until ctx is done: it reloads on every version the
// store announces. Errors are logged and the previous snapshot stays in force.
func (l *Live) Follow(ctx context.Context, cs store.ConfigStore, v *Validator, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for range cs.WatchConfig(ctx) {
		if err := l.Reload(ctx, cs, v); err != nil && ctx.Err() == nil {
			log.Warn("configuration reload failed; keeping the current configuration", "err", err)
		}
	}
}
