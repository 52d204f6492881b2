package config

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// Live holds the snapshot in force. Readers never block writers: a new configuration is
// compiled aside and swapped in atomically. Changed tells who waits for a change (the xDS
// server) when one happens, so nobody polls.
type Live struct {
	p atomic.Pointer[Snapshot]

	mu      sync.Mutex
	changed chan struct{} // closed at the next change; nil until someone asks
}

// NewLive returns a Live holding s.
func NewLive(s *Snapshot) *Live {
	l := &Live{}
	l.p.Store(s)
	return l
}

// Load returns the snapshot in force (nil before the first Store).
func (l *Live) Load() *Snapshot { return l.p.Load() }

// Store swaps in s unconditionally (a configuration file at start, tests).
func (l *Live) Store(s *Snapshot) {
	l.p.Store(s)
	l.notify()
}

// Changed returns a channel that is closed when the snapshot in force next changes. Take it
// before Load, so a change between the two is not missed.
func (l *Live) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// notify closes the channel of whoever waits for the change just made.
func (l *Live) notify() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// Reload loads, validates and compiles the store's configuration and swaps it in. A
// configuration that no longer validates (written by a newer or buggy replica) is refused and
// the current snapshot stays in force. So is a version that is not newer than the one in
// force: two reloads that finish out of order never roll the configuration back, and an empty
// store (version 0) never replaces a configuration file in force.
func (l *Live) Reload(ctx context.Context, cs store.ConfigStore, v *Validator) error {
	cur, err := cs.LoadConfig(ctx)
	if err != nil {
		return fmt.Errorf("loading configuration: %w", err)
	}
	if old := l.Load(); old != nil && cur.Version <= old.Version {
		return nil
	}
	if err := v.Stored(cur.Config); err != nil {
		return fmt.Errorf("configuration version %d: %w", cur.Version, err)
	}
	snap, err := Compile(cur.Version, cur.Config, cur.Secrets)
	if err != nil {
		return fmt.Errorf("compiling configuration version %d: %w", cur.Version, err)
	}
	l.swapNewer(snap)
	return nil
}

// swapNewer installs snap unless a snapshot of the same or a newer version got in first.
func (l *Live) swapNewer(snap *Snapshot) {
	for {
		old := l.p.Load()
		if old != nil && old.Version >= snap.Version {
			return
		}
		if l.p.CompareAndSwap(old, snap) {
			l.notify()
			return
		}
	}
}
