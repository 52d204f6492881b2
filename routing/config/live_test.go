package config_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/internal/fakeclock"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
)

// faultyStore is a real memory config store with faults a shared store shows: loads that
// fail, a load that is held until released, notifications that never come.
type faultyStore struct {
	store.ConfigStore
	failLoads atomic.Int32  // the next n LoadConfig calls fail
	loads     atomic.Int32  // LoadConfig calls so far
	hold      chan struct{} // when set, the first LoadConfig waits for it after reading
	held      chan struct{} // closed once that load has read its snapshot
	holdOnce  sync.Once
	silent    bool // WatchConfig never announces a version
}

func newFaultyStore() *faultyStore { return &faultyStore{ConfigStore: memstore.New()} }

var errLoad = errors.New("load failed (injected)")

func (s *faultyStore) LoadConfig(ctx context.Context) (store.ConfigSnapshot, error) {
	s.loads.Add(1)
	if s.failLoads.Add(-1) >= 0 {
		return store.ConfigSnapshot{}, errLoad
	}
	snap, err := s.ConfigStore.LoadConfig(ctx)
	if s.hold != nil {
		first := false
		s.holdOnce.Do(func() { first = true })
		if first {
			close(s.held)
			<-s.hold
		}
	}
	return snap, err
}

func (s *faultyStore) WatchConfig(ctx context.Context) <-chan uint64 {
	if s.silent {
		ch := make(chan uint64)
		go func() { <-ctx.Done(); close(ch) }()
		return ch
	}
	return s.ConfigStore.WatchConfig(ctx)
}

func cfgWith(ids ...string) *configv1.Config {
	cfg := &configv1.Config{}
	for _, id := range ids {
		d := goodDeployment()
		d.Id = id
		d.ApiKey = "sk-" + id
		cfg.Deployments = append(cfg.Deployments, d)
	}
	return cfg
}

func put(t *testing.T, s store.ConfigStore, ids ...string) uint64 {
	t.Helper()
	v, err := s.ReplaceConfig(t.Context(), cfgWith(ids...))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func version(l *config.Live) uint64 {
	if s := l.Load(); s != nil {
		return s.Version
	}
	return 0
}

// eventually polls cond with a deadline: the follower runs in its own goroutine.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 5s: %s", what)
		}
		time.Sleep(time.Millisecond) // polling another goroutine's progress with a deadline
	}
}

func follow(t *testing.T, l *config.Live, s store.ConfigStore, clock *fakeclock.Clock) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		config.Follower{Clock: clock, PollInterval: time.Minute, MinBackoff: time.Second, MaxBackoff: 4 * time.Second}.
			Run(ctx, l, s, validator(t))
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// TestCompileFileKeepsKeys: a file compiled on its own keeps its inline keys (a replica that
// starts without its store routes with them).
func TestCompileFileKeepsKeys(t *testing.T) {
	snap, err := config.CompileFile(cfgWith("a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if got := snap.Deployments[id].APIKey; got != "sk-"+id {
			t.Fatalf("deployment %s has key %q, want sk-%s", id, got, id)
		}
	}
}

// TestReloadRefusesOlderVersion: a store answering an older version than the one in force
// (a reload that lost a race, an empty store) changes nothing.
func TestReloadRefusesOlderVersion(t *testing.T) {
	s := memstore.New()
	put(t, s, "old")
	snap, err := config.Compile(5, cfgWith("new"), nil)
	if err != nil {
		t.Fatal(err)
	}
	l := config.NewLive(snap)
	if err := l.Reload(t.Context(), s, validator(t)); err != nil {
		t.Fatal(err)
	}
	if version(l) != 5 || l.Load().Deployments["new"] == nil {
		t.Fatalf("reload rolled back to version %d", version(l))
	}
	// An empty store (version 0) never replaces a configuration file in force.
	file, err := config.CompileFile(cfgWith("file"))
	if err != nil {
		t.Fatal(err)
	}
	l = config.NewLive(file)
	if err := l.Reload(t.Context(), memstore.New(), validator(t)); err != nil {
		t.Fatal(err)
	}
	if l.Load().Deployments["file"] == nil {
		t.Fatal("an empty store replaced the configuration file")
	}
}

// TestConcurrentReloadsNeverRollBack: reload A reads version 1 and is held; reload B reads
// version 2 and swaps it in; A finishing afterwards must leave version 2 in force.
func TestConcurrentReloadsNeverRollBack(t *testing.T) {
	s := newFaultyStore()
	s.hold, s.held = make(chan struct{}), make(chan struct{})
	put(t, s, "v1")
	l := &config.Live{}
	v := validator(t)
	errA := make(chan error, 1)
	go func() { errA <- l.Reload(context.Background(), s, v) }()
	<-s.held
	put(t, s, "v2")
	if err := l.Reload(t.Context(), s, v); err != nil {
		t.Fatal(err)
	}
	if version(l) != 2 {
		t.Fatalf("version %d in force, want 2", version(l))
	}
	close(s.hold)
	if err := <-errA; err != nil {
		t.Fatal(err)
	}
	if version(l) != 2 || l.Load().Deployments["v2"] == nil {
		t.Fatalf("the slower reload rolled the configuration back to version %d", version(l))
	}
}

// TestFollowRetriesFailedReload: the only announcement of a version meets failing loads;
// the follower retries with backoff (1 s, then 2 s) until the version is in force.
func TestFollowRetriesFailedReload(t *testing.T) {
	s := newFaultyStore()
	put(t, s, "a")
	l := &config.Live{}
	if err := l.Reload(t.Context(), s, validator(t)); err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New(time.Unix(1_900_000_000, 0))
	follow(t, l, s, clock)
	eventually(t, "follower waiting on its poll", func() bool { return clock.Waiting() == 1 })

	s.failLoads.Store(2)
	put(t, s, "a", "b") // announced once
	eventually(t, "first failed reload and a retry timer", func() bool { return s.loads.Load() == 2 && clock.Waiting() == 2 })
	if version(l) != 1 {
		t.Fatalf("version %d in force after a failed load", version(l))
	}
	clock.Advance(time.Second)
	eventually(t, "second failed reload and a doubled retry timer", func() bool { return s.loads.Load() == 3 && clock.Waiting() == 2 })
	clock.Advance(time.Second) // 2 s after the second failure is not yet over
	if version(l) != 1 {
		t.Fatal("retried before the doubled backoff")
	}
	clock.Advance(time.Second)
	eventually(t, "the announced version in force", func() bool { return version(l) == 2 })
	if l.Load().Deployments["b"] == nil {
		t.Fatal("version 2 in force without its deployment")
	}
}

// TestFollowPollsWithoutNotification: no announcement ever arrives; the periodic version
// poll finds the change.
func TestFollowPollsWithoutNotification(t *testing.T) {
	s := newFaultyStore()
	s.silent = true
	put(t, s, "a")
	l := &config.Live{}
	if err := l.Reload(t.Context(), s, validator(t)); err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New(time.Unix(1_900_000_000, 0))
	follow(t, l, s, clock)
	eventually(t, "follower waiting on its poll", func() bool { return clock.Waiting() == 1 })
	put(t, s, "a", "b")
	clock.Advance(59 * time.Second)
	if version(l) != 1 {
		t.Fatal("reloaded before the poll")
	}
	clock.Advance(time.Second)
	eventually(t, "the polled version in force", func() bool { return version(l) == 2 })
}
