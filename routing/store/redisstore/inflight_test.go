package redisstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

// The in-flight count of a routing read comes from the summary in each deployment's state
// record (count + earliest expiry), kept by the scripts from the in-flight set; the set is
// counted only when the summary lists an entry that has expired since the last write.

// roundTrips counts the round trips of routing reads a client makes: commands and pipelines
// that read state records or count in-flight sets (not the connection set-up go-redis sends
// through the same hooks).
type roundTrips struct{ n atomic.Int64 }

func isRead(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "mget", "get", "zcount":
		return true
	}
	return false
}

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isRead(cmd) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && isRead(cmds[0]) {
			h.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*roundTrips)(nil)

// readPaths runs fn against a store of each read path: one MGET (single-node clients) and
// pipelined GETs (what a Cluster client uses).
func readPaths(t *testing.T, fn func(t *testing.T, s *redisstore.Store)) {
	for _, path := range []struct {
		name string
		opts []redisstore.Option
	}{{"MGET", nil}, {"Pipelined", []redisstore.Option{redisstore.WithPipelinedReads()}}} {
		t.Run(path.name, func(t *testing.T) {
			addr, prefix := shared(t)
			s := newStore(t, addr, prefix, path.opts...)
			t.Cleanup(func() { _ = s.Close() })
			fn(t, s)
		})
	}
}

// readCounting reads refs at now and reports the in-flight counts and the round trips spent.
func readCounting(t *testing.T, s *redisstore.Store, rt *roundTrips, now time.Time, ids ...string) ([]int64, int64) {
	t.Helper()
	refs := make([]store.DeploymentRef, len(ids))
	for i, id := range ids {
		refs[i] = store.DeploymentRef{ID: id, Domain: store.DomainOf(id, "")}
	}
	out := make([]store.DeploymentState, len(refs))
	before := rt.n.Load()
	if err := s.ReadStates(t.Context(), now, refs, out); err != nil {
		t.Fatal(err)
	}
	counts := make([]int64, len(out))
	for i := range out {
		counts[i] = out[i].Metrics.InFlight
	}
	return counts, rt.n.Load() - before
}

func startAt(t *testing.T, s store.Store, dep, attempt string, now, expires time.Time) {
	t.Helper()
	if err := s.StartAttempt(t.Context(), store.AttemptStart{DeploymentID: dep, AttemptID: attempt, Now: now, Expires: expires}); err != nil {
		t.Fatal(err)
	}
}

// TestInFlightSummaryExactBeforeExpiry: while every entry is live the summary is the count,
// read in one round trip with the rest of the state, after starts and finishes alike.
func TestInFlightSummaryExactBeforeExpiry(t *testing.T) {
	readPaths(t, func(t *testing.T, s *redisstore.Store) {
		rt := &roundTrips{}
		s.Client().AddHook(rt)
		for i := range 5 {
			startAt(t, s, "a", fmt.Sprint("a", i), t0, t0.Add(time.Duration(10+i)*time.Second))
		}
		startAt(t, s, "b", "b0", t0, t0.Add(time.Minute))
		mustFinish(t, s, store.AttemptFinish{DeploymentID: "a", AttemptID: "a2", RequestID: "r", Now: t0, Effect: store.EffectSuccess, Settings: defaults(), Latency: time.Second})
		for _, now := range []time.Time{t0, t0.Add(9 * time.Second), t0.Add(10*time.Second - time.Microsecond)} {
			counts, trips := readCounting(t, s, rt, now, "a", "b", "nobody")
			if counts[0] != 4 || counts[1] != 1 || counts[2] != 0 {
				t.Fatalf("at t0+%v: in-flight %v, want [4 1 0]", now.Sub(t0), counts)
			}
			if trips != 1 {
				t.Fatalf("at t0+%v: the read took %d round trips, want 1", now.Sub(t0), trips)
			}
		}
		n, earliest, err := s.InFlightSummary(t.Context(), "a")
		if err != nil || n != 4 || earliest != t0.Add(10*time.Second).UnixMicro() {
			t.Fatalf("summary of a: %d entries, earliest %d (%v), want 4 and t0+10s", n, earliest, err)
		}
	})
}

// TestInFlightSummaryStaleFollowUp: entries that expire with no write since (a crashed
// replica never finishes them) leave a summary whose earliest expiry has passed; the read
// then counts those deployments' sets in a second round trip, and only theirs, so the
// count is still exact. The next write prunes and the summary is trusted again.
func TestInFlightSummaryStaleFollowUp(t *testing.T) {
	readPaths(t, func(t *testing.T, s *redisstore.Store) {
		rt := &roundTrips{}
		s.Client().AddHook(rt)
		for i := range 3 {
			startAt(t, s, "crashed", fmt.Sprint("c", i), t0, t0.Add(time.Duration(10*(i+1))*time.Second)) // t0+10s, +20s, +30s
		}
		startAt(t, s, "healthy", "h0", t0, t0.Add(time.Hour))
		for _, tc := range []struct {
			at    time.Duration
			want  int64
			trips int64
		}{
			{5 * time.Second, 3, 1},
			{10 * time.Second, 2, 2}, // an entry counts while now < its expiry: c0 no longer does
			{25 * time.Second, 1, 2},
			{30 * time.Second, 0, 2},
			{time.Hour, 0, 2},
		} {
			counts, trips := readCounting(t, s, rt, t0.Add(tc.at), "crashed", "healthy")
			if counts[0] != tc.want || trips != tc.trips {
				t.Fatalf("at t0+%v: in-flight %d in %d round trips, want %d in %d", tc.at, counts[0], trips, tc.want, tc.trips)
			}
			if tc.at < time.Hour && counts[1] != 1 {
				t.Fatalf("at t0+%v: the healthy deployment reads %d in flight, want 1", tc.at, counts[1])
			}
		}
		// A write at t0+15s prunes c0 and recomputes the summary: earliest t0+20s.
		startAt(t, s, "crashed", "late", t0.Add(15*time.Second), t0.Add(time.Hour))
		counts, trips := readCounting(t, s, rt, t0.Add(19*time.Second), "crashed", "healthy")
		if counts[0] != 3 || trips != 1 {
			t.Fatalf("after a write: in-flight %d in %d round trips, want 3 in 1", counts[0], trips)
		}
		n, earliest, err := s.InFlightSummary(t.Context(), "crashed")
		if err != nil || n != 3 || earliest != t0.Add(20*time.Second).UnixMicro() {
			t.Fatalf("summary after the write: %d entries, earliest %d (%v), want 3 and t0+20s", n, earliest, err)
		}
		// A read from a replica whose clock lags the writer's still counts what is live for it.
		if counts, _ := readCounting(t, s, rt, t0.Add(12*time.Second), "crashed"); counts[0] != 3 {
			t.Fatalf("a lagging reader counts %d, want 3 (c0 was pruned by the later write)", counts[0])
		}
	})
}

// TestInFlightSummaryUnderConcurrentReplicas: 64 callers on 8 replicas start and finish
// attempts on one deployment at once (some finish, some stay in flight, with different
// expiries); the summary in the state record then matches the set exactly, and so does
// the count every replica reads.
func TestInFlightSummaryUnderConcurrentReplicas(t *testing.T) {
	rs := replicas(t, standaloneTarget(t), nReplicas)
	expiry := func(i int) time.Time { return t0.Add(time.Minute + time.Duration(i%7)*time.Second) }
	concurrently(func(i int) {
		r := rs[i%nReplicas]
		id := fmt.Sprint("a", i)
		if err := r.StartAttempt(context.Background(), store.AttemptStart{DeploymentID: "d", AttemptID: id, Now: t0, Expires: expiry(i)}); err != nil {
			t.Errorf("StartAttempt: %v", err)
			return
		}
		if i%3 != 0 {
			return // stays in flight
		}
		effect := []store.Effect{store.EffectSuccess, store.EffectNeutral, store.EffectTransient}[i%2]
		if _, err := r.FinishAttempt(context.Background(), store.AttemptFinish{DeploymentID: "d", Domain: store.DomainOf("d", ""),
			AttemptID: id, RequestID: id, Now: t0.Add(time.Millisecond), Effect: effect, Settings: defaults(), Latency: time.Second}); err != nil {
			t.Errorf("FinishAttempt: %v", err)
		}
	})
	var want int64
	earliest := time.Time{}
	for i := range nCallers {
		if i%3 != 0 {
			want++
			if e := expiry(i); earliest.IsZero() || e.Before(earliest) {
				earliest = e
			}
		}
	}
	ctx := t.Context()
	rdb := rs[0].Client()
	if n := rdb.ZCard(ctx, rs[0].InflightKey("d")).Val(); n != want {
		t.Fatalf("the set holds %d entries, want %d", n, want)
	}
	n, first, err := rs[0].InFlightSummary(ctx, "d")
	if err != nil || n != want || first != earliest.UnixMicro() {
		t.Fatalf("summary: %d entries, earliest %d (%v); want %d and %d", n, first, err, want, earliest.UnixMicro())
	}
	for i, r := range rs {
		if got := readOne(t, r, "d", "", t0.Add(time.Second)).Metrics.InFlight; got != want {
			t.Fatalf("replica %d reads %d in flight, want %d", i, got, want)
		}
	}
	// Past the earliest expiry (no write since) the readers fall back to the set.
	at := t0.Add(time.Minute + 3*time.Second)
	live := rdb.ZCount(ctx, rs[0].InflightKey("d"), fmt.Sprintf("(%d", at.UnixMicro()), "+inf").Val()
	if got := readOne(t, rs[5], "d", "", at).Metrics.InFlight; got != live || live == want || live == 0 {
		t.Fatalf("at t0+1m3s a replica reads %d in flight, the set holds %d live of %d", got, live, want)
	}
}

// TestConcurrentReadsLineUp: 64 goroutines read overlapping candidate lists through one
// store at once, on both read paths; every answer lines up with its own refs, so the pooled
// buffers and the key cache are never shared between two reads in progress.
func TestConcurrentReadsLineUp(t *testing.T) {
	readPaths(t, func(t *testing.T, s *redisstore.Store) {
		const deps = 12
		for i := range deps {
			for j := range i {
				startAt(t, s, fmt.Sprint("d", i), fmt.Sprint("a", j), t0, t0.Add(time.Hour))
			}
		}
		concurrently(func(c int) {
			n := 1 + c%deps
			refs := make([]store.DeploymentRef, n)
			for k := range refs {
				i := (c + k) % deps
				refs[k] = store.DeploymentRef{ID: fmt.Sprint("d", i), Domain: fmt.Sprint("acct", i%3)}
			}
			out := make([]store.DeploymentState, n)
			for range 5 {
				if err := s.ReadStates(context.Background(), t0, refs, out); err != nil {
					t.Errorf("ReadStates: %v", err)
					return
				}
				for k, ref := range refs {
					if want := int64((c + k) % deps); out[k].Metrics.InFlight != want {
						t.Errorf("caller %d: %s reads %d in flight, want %d", c, ref.ID, out[k].Metrics.InFlight, want)
						return
					}
				}
			}
		})
	})
}
