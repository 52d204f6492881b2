package redisstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-gw/switchyard/internal/redistest"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

// TestResilientOutageUnderLoad stops Redis in the middle of concurrent routing traffic
// (attempt start/finish, ReadStates, AcquireProbe) and restarts it on the same port:
//   - no call fails, and none takes much longer than one operation timeout;
//   - the wrapper reports the outage, recovers, and replays the releases of attempts that
//     started in Redis and ended during the outage, so in-flight returns to 0 in Redis;
//   - nothing leaks: the goroutine count returns to where it was.
func TestResilientOutageUnderLoad(t *testing.T) {
	srv := redistest.Start(t)
	baseline := runtime.NumGoroutine() // after Start: the server's own wait goroutine stays
	prefix := redistest.Prefix(t)
	reg := prometheus.NewRegistry()
	// Long enough that a loaded machine (the race detector, other builds) does not time out
	// an operation while Redis is up; the outage itself refuses connections at once.
	const opTimeout = time.Second
	r, err := redisstore.NewResilient(
		newStore(t, srv.Addr(), prefix, redisstore.WithOpTimeout(opTimeout), redisstore.WithConfigPollInterval(50*time.Millisecond)),
		redisstore.ResilientConfig{Registerer: reg, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
			Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	watch := r.WatchConfig(watchCtx)
	go func() {
		for range watch { // drain; the test only needs the watcher running through the outage
		}
	}()

	refs := make([]store.DeploymentRef, 8)
	for i := range refs {
		refs[i] = store.DeploymentRef{ID: fmt.Sprint("d", i), Domain: "acct"}
	}
	cs := defaults()
	var (
		ops, failures atomic.Int64
		maxLatency    atomic.Int64
		firstErr      atomic.Value
		stop          = make(chan struct{})
		wg            sync.WaitGroup
	)
	timed := func(err error, begin time.Time) {
		if d := int64(time.Since(begin)); d > maxLatency.Load() {
			maxLatency.Store(d) // racy max is fine: any large value is kept by some store
		}
		if err != nil {
			failures.Add(1)
			firstErr.CompareAndSwap(nil, err)
		}
	}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			out := make([]store.DeploymentState, len(refs))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				now := time.Now()
				dep := refs[(w+n)%len(refs)]
				id := fmt.Sprintf("w%d-%d", w, n)
				begin := time.Now()
				timed(r.StartAttempt(ctx, store.AttemptStart{DeploymentID: dep.ID, AttemptID: id, Now: now, Expires: now.Add(time.Hour)}), begin)
				begin = time.Now()
				timed(r.ReadStates(ctx, now, refs, out), begin)
				begin = time.Now()
				_, err := r.AcquireProbe(ctx, dep.ID, id, now, time.Second)
				timed(err, begin)
				effect := []store.Effect{store.EffectSuccess, store.EffectNeutral, store.EffectTransient}[n%3]
				begin = time.Now()
				_, err = r.FinishAttempt(ctx, store.AttemptFinish{DeploymentID: dep.ID, Domain: dep.Domain, AttemptID: id, RequestID: id,
					Now: time.Now(), Effect: effect, Settings: cs, Latency: time.Millisecond, CompletionTokens: 1})
				timed(err, begin)
				ops.Add(1)
			}
		}()
	}
	progress := func(what string, n int64) {
		t.Helper()
		from := ops.Load()
		eventually(t, 20*time.Second, what, func() bool { return ops.Load() >= from+n })
	}

	progress("traffic with Redis up", 100)
	ctx := context.Background()
	const held = 16 // attempts that start in Redis and end during the outage
	for i := range held {
		now := time.Now()
		if err := r.StartAttempt(ctx, store.AttemptStart{DeploymentID: "d0", AttemptID: fmt.Sprint("held", i), Now: now, Expires: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if st := r.Status(); st.Degraded {
		t.Fatalf("degraded before the outage: %+v", st)
	}

	srv.Stop()
	eventually(t, 10*time.Second, "degraded after Redis stopped", func() bool { return r.Status().Degraded })
	for i := range held {
		if _, err := r.FinishAttempt(ctx, store.AttemptFinish{DeploymentID: "d0", Domain: "acct", AttemptID: fmt.Sprint("held", i),
			RequestID: fmt.Sprint("held", i), Now: time.Now(), Effect: store.EffectNeutral, Settings: cs}); err != nil {
			t.Fatal(err)
		}
	}
	progress("traffic with Redis down", 200)
	if st := r.Status(); !st.Degraded || st.Since.IsZero() || st.LastError == "" {
		t.Fatalf("status during the outage: %+v", st)
	}
	if gatherCounter(reg, "switchyard_store_degraded", "", "") != 1 {
		t.Fatal("degraded gauge not 1 during the outage")
	}

	srv.Restart()
	eventually(t, 20*time.Second, "recovered after Redis restarted", func() bool { return !r.Status().Degraded })
	progress("traffic after recovery", 100)
	close(stop)
	wg.Wait()

	if n := failures.Load(); n != 0 {
		t.Fatalf("%d calls failed; first: %v", n, firstErr.Load())
	}
	// A call costs at most two operation timeouts (a failed finish, then its release on a
	// wrapper that recovered meanwhile), plus scheduling slack on a shared 2-core machine
	// under -race. An unbounded wait (socket timeouts, dial retries) would show up here.
	if d := time.Duration(maxLatency.Load()); d > 2*opTimeout+2*time.Second {
		t.Fatalf("slowest call took %v with an operation timeout of %v", d, opTimeout)
	}
	t.Logf("%d iterations; slowest call %v; releases replayed %v; local operations %v",
		ops.Load(), time.Duration(maxLatency.Load()), gatherCounter(reg, "switchyard_store_replayed_releases_total", "", ""),
		sumCounter(reg, "switchyard_store_local_operations_total"))
	if got := gatherCounter(reg, "switchyard_store_replayed_releases_total", "", ""); got < held {
		t.Fatalf("replayed %v releases, want at least the %d held attempts", got, held)
	}
	check := newStore(t, srv.Addr(), prefix)
	out := make([]store.DeploymentState, len(refs))
	if err := check.ReadStates(ctx, time.Now(), refs, out); err != nil {
		t.Fatal(err)
	}
	for i, st := range out {
		if st.Metrics.InFlight != 0 {
			t.Fatalf("%s: %d attempts still in flight in Redis after every attempt ended", refs[i].ID, st.Metrics.InFlight)
		}
	}
	_ = check.Close()

	stopWatch()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second) // go-redis's dial prober sleeps up to 1 s
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			t.Fatalf("goroutines: %d after Close, %d before the test", runtime.NumGoroutine(), baseline)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}
