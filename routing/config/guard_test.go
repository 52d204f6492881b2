package config_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/internal/fakeclock"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
)

// counts records a guard's events.
type counts struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counts) count(e string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[e]++
}

func (c *counts) get(e string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[e]
}

// syncBuffer is a log sink safe for the guard's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestGuardRestoresTheServedConfiguration: a store behind the configuration in force is put
// back at the served version, keys included, with one ERROR line and the events counted;
// writes are refused until then and continue from the served version after. A memory store
// cannot lose its configuration on its own (one process holds it and serves from it), so a
// fresh one stands in for the Redis that restarted empty; the Redis case runs through the
// binary (cmd/switchyard TestRedisRestartedEmptyIsRestored).
func TestGuardRestoresTheServedConfiguration(t *testing.T) {
	served, err := config.Compile(5, cfgWith("a", "b"), map[string]string{"a": "sk-a", "b": "sk-b"})
	if err != nil {
		t.Fatal(err)
	}
	l := config.NewLive(served)
	s := memstore.New() // empty: version 0
	var c counts
	var logs syncBuffer
	clock := fakeclock.New(time.Unix(1000, 0))
	g := config.NewGuard(l, s, config.GuardOptions{Clock: clock, Count: c.count,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})

	err = g.Writable(0)
	var behind *config.StoreBehindError
	if !errors.As(err, &behind) || !errors.Is(err, config.ErrStoreBehind) || behind.Stored != 0 || behind.Served != 5 {
		t.Fatalf("Writable(0) with version 5 in force = %v, want a StoreBehindError 0 < 5", err)
	}
	g.Check(t.Context())
	g.Check(t.Context()) // nothing more to do
	snap, err := s.LoadConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version != 5 || len(snap.Config.GetDeployments()) != 2 || snap.Secrets["a"] != "sk-a" || snap.Secrets["b"] != "sk-b" {
		t.Fatalf("store after the guard: version %d, %d deployments, keys of a/b set: %v/%v",
			snap.Version, len(snap.Config.GetDeployments()), snap.Secrets["a"] != "", snap.Secrets["b"] != "")
	}
	if err := g.Writable(snap.Version); err != nil {
		t.Fatalf("Writable after the restore: %v", err)
	}
	if v, err := s.ReplaceConfigIf(t.Context(), snap.Version, snap.Config); err != nil || v != 6 {
		t.Fatalf("the next write got version %d, %v; want 6, after the served 5", v, err)
	}
	if c.get(config.GuardBehind) != 1 || c.get(config.GuardRestored) != 1 || c.get(config.GuardCaughtUp) != 0 {
		t.Fatalf("events %v, want one behind and one restored", c.m)
	}
	if st := g.Status(); st.Behind {
		t.Fatalf("status %+v after the restore", st)
	}
	if n := strings.Count(logs.String(), `"level":"ERROR"`); n != 1 || strings.Count(logs.String(), `"level":"WARN"`) != 0 {
		t.Fatalf("%d ERROR lines, want exactly one for the event:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "sk-a") {
		t.Fatal("a provider key reached the log")
	}
}

// TestGuardsRaceOneRestoreWins: two replicas sharing one store, serving versions 7 and 9,
// restore it at once: the store ends at 9 with 9's configuration, restored by exactly one of
// them, and the other sees the store caught up.
func TestGuardsRaceOneRestoreWins(t *testing.T) {
	for range 20 {
		s := memstore.New()
		v7, _ := config.Compile(7, cfgWith("seven"), nil)
		v9, _ := config.Compile(9, cfgWith("nine"), nil)
		var c counts
		guards := []*config.Guard{
			config.NewGuard(config.NewLive(v7), s, config.GuardOptions{Count: c.count}),
			config.NewGuard(config.NewLive(v9), s, config.GuardOptions{Count: c.count}),
		}
		var wg sync.WaitGroup
		for _, g := range guards {
			wg.Go(func() { g.Check(t.Context()) })
		}
		wg.Wait()
		snap, _ := s.LoadConfig(t.Context())
		if snap.Version != 9 || len(snap.Config.GetDeployments()) != 1 || snap.Config.GetDeployments()[0].GetId() != "nine" {
			t.Fatalf("store at version %d with %v, want 9's configuration", snap.Version, snap.Config)
		}
		for _, g := range guards {
			if g.Status().Behind {
				t.Fatalf("a guard still sees the store behind: %+v", g.Status())
			}
		}
		// 9 restored; 7 restored first (then 9 over it), found the store caught up, or
		// checked after 9's restore and found nothing behind. Every event ended.
		ended := c.get(config.GuardRestored) + c.get(config.GuardCaughtUp)
		if c.get(config.GuardRestored) < 1 || ended != c.get(config.GuardBehind) {
			t.Fatalf("events %v", c.m)
		}
	}
}

// TestGuardRunRestoresWhenWritableFindsTheStoreBehind: the guard's loop reads the store's
// version every PollInterval, and at once when the admin API's gate refused a write.
func TestGuardRunRestoresWhenWritableFindsTheStoreBehind(t *testing.T) {
	served, _ := config.Compile(3, cfgWith("a"), nil)
	l := config.NewLive(served)
	s := memstore.New()
	put(t, s, "a") // version 1: behind the 3 in force
	clock := fakeclock.New(time.Unix(1000, 0))
	g := config.NewGuard(l, s, config.GuardOptions{Clock: clock, PollInterval: time.Minute})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx) }()
	defer func() { cancel(); <-done }()
	eventually(t, "the loop waiting for its poll", func() bool { return clock.Waiting() == 1 })
	clock.Advance(time.Minute)
	eventually(t, "the poll restores version 3", func() bool { v, _ := s.ConfigVersion(t.Context()); return v == 3 })

	// A newer version comes into force while the store stays at 3 (as after a restore won by
	// a replica that served an older version). No poll is due (the clock stands still), but
	// a refused write wakes the guard.
	served4, _ := config.Compile(4, cfgWith("a", "b"), nil)
	l.Store(served4)
	if err := g.Writable(3); err == nil {
		t.Fatal("Writable(3) with version 4 in force accepted")
	}
	eventually(t, "the refused write's wake-up restores version 4", func() bool {
		v, _ := s.ConfigVersion(t.Context())
		return v == 4
	})
}
