package redisstore_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-gw/switchyard/internal/fakeclock"
	"github.com/switchyard-gw/switchyard/internal/redistest"
	"github.com/switchyard-gw/switchyard/internal/testlog"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

func count(logs *testlog.Buffer, substr string) int { return strings.Count(logs.String(), substr) }

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(2 * time.Millisecond) // polling a condition with a deadline
	}
}

func checks(reg *prometheus.Registry, result string) float64 {
	return gatherCounter(reg, "switchyard_store_recovery_checks_total", "result", result)
}

// gatherCounter reads one series of a counter or gauge from reg (0 when absent); an empty
// label matches the unlabelled series.
func gatherCounter(reg *prometheus.Registry, name, label, value string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := label == ""
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					match = true
				}
			}
			if !match {
				continue
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// sumCounter adds every series of a counter vector.
func sumCounter(reg *prometheus.Registry, name string) float64 {
	mfs, _ := reg.Gather()
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestResilientBackoffAndRecovery walks one outage with the wrapper's clock in the test's
// hands: the first failure degrades at once; routing and config reads go on from local
// state; Redis is checked only when the backoff (doubling) has passed; the warning is rate
// limited; on recovery the queued in-flight releases are replayed and watchers learn the
// config version written while notifications could not arrive.
func TestResilientBackoffAndRecovery(t *testing.T) {
	srv := redistest.Start(t)
	prefix := redistest.Prefix(t)
	clock := fakeclock.New(time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC))
	logs := &testlog.Buffer{}
	reg := prometheus.NewRegistry()
	r, err := redisstore.NewResilient(newStore(t, srv.Addr(), prefix, redisstore.WithConfigPollInterval(time.Hour)), redisstore.ResilientConfig{
		Clock: clock, Registerer: reg, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		MinBackoff: time.Second, MaxBackoff: 4 * time.Second, LogInterval: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	ctx := t.Context()
	refs := []store.DeploymentRef{{ID: "d", Domain: store.DomainOf("d", "")}}
	out := make([]store.DeploymentState, 1)

	v1, err := r.ReplaceConfig(ctx, testConfig("d"))
	if err != nil {
		t.Fatal(err)
	}
	if snap, err := r.LoadConfig(ctx); err != nil || snap.Version != v1 {
		t.Fatalf("LoadConfig while healthy: %v %v", snap.Version, err)
	}
	watch := r.WatchConfig(ctx)
	awaitVersion(t, watch, v1, 5*time.Second)
	const held = 4
	for i := range held {
		if err := r.StartAttempt(ctx, store.AttemptStart{DeploymentID: "d", AttemptID: fmt.Sprint("held", i), Now: t0, Expires: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if st := r.Status(); st.Degraded {
		t.Fatalf("degraded while Redis is up: %+v", st)
	}

	srv.Stop()
	if err := r.ReadStates(ctx, t0, refs, out); err != nil {
		t.Fatalf("ReadStates failed with Redis down: %v", err)
	}
	st := r.Status()
	if !st.Degraded || !st.Since.Equal(clock.Now()) || st.LastError == "" {
		t.Fatalf("status after the first failure: %+v", st)
	}
	if gatherCounter(reg, "switchyard_store_degraded", "", "") != 1 {
		t.Fatal("degraded gauge not set")
	}
	for i := range held {
		if _, err := r.FinishAttempt(ctx, store.AttemptFinish{DeploymentID: "d", Domain: refs[0].Domain, AttemptID: fmt.Sprint("held", i), RequestID: "r", Now: t0, Effect: store.EffectNeutral, Settings: defaults()}); err != nil {
			t.Fatalf("FinishAttempt with Redis down: %v", err)
		}
	}
	// Degraded calls never touch Redis: only the first call saw an error.
	for i := range 100 {
		if err := r.StartAttempt(ctx, store.AttemptStart{DeploymentID: "d", AttemptID: fmt.Sprint("local", i), Now: t0, Expires: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := r.ReadStates(ctx, t0, refs, out); err != nil {
			t.Fatal(err)
		}
	}
	if out[0].Metrics.InFlight != 100 {
		t.Fatalf("local in-flight = %d, want the 100 local attempts", out[0].Metrics.InFlight)
	}
	if n := gatherCounter(reg, "switchyard_store_redis_errors_total", "", ""); n != 1 {
		t.Fatalf("%v Redis errors after 200 degraded calls, want only the first call's", n)
	}
	if n := sumCounter(reg, "switchyard_store_local_operations_total"); n != 1+held+200 {
		t.Fatalf("%v operations served locally, want %d", n, 1+held+200)
	}
	if snap, err := r.LoadConfig(ctx); err != nil || snap.Version != v1 || len(snap.Config.GetDeployments()) != 1 || snap.Secrets["d"] == "" {
		t.Fatalf("LoadConfig with Redis down = version %d, %v; want the last snapshot", snap.Version, err)
	}
	if v, err := r.ConfigVersion(ctx); err != nil || v != v1 {
		t.Fatalf("ConfigVersion with Redis down = %d, %v", v, err)
	}
	if _, err := r.ReplaceConfig(ctx, testConfig("d", "x")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("config write with Redis down: %v, want ErrUnavailable", err)
	}

	// Backoff: no check before MinBackoff, then one per (doubling) backoff.
	eventually(t, 5*time.Second, "recovery loop waiting on the clock", func() bool { return clock.Waiting() == 1 })
	if n := checks(reg, "failed") + checks(reg, "ok"); n != 0 {
		t.Fatalf("%v checks before the backoff passed", n)
	}
	clock.Advance(time.Second)
	eventually(t, 5*time.Second, "first failed check", func() bool { return checks(reg, "failed") == 1 })
	eventually(t, 5*time.Second, "recovery loop waiting again", func() bool { return clock.Waiting() == 1 })
	clock.Advance(time.Second) // the backoff is 2s now: nothing is due yet
	if clock.Waiting() != 1 {
		t.Fatal("checked again after 1s although the backoff doubled to 2s")
	}
	clock.Advance(time.Second)
	eventually(t, 5*time.Second, "second failed check", func() bool { return checks(reg, "failed") == 2 })

	// One warning per outage and LogInterval, however many calls are served locally.
	if n := count(logs, "redis unreachable") + count(logs, "redis still unreachable"); n != 1 {
		t.Fatalf("%d warnings so far, want 1\n%s", n, logs.String())
	}
	clock.Advance(time.Minute)
	for range 10 {
		_ = r.ReadStates(ctx, t0, refs, out)
	}
	if n := count(logs, "redis still unreachable"); n != 1 {
		t.Fatalf("%d repeated warnings after one LogInterval, want 1", n)
	}

	// Redis comes back; another replica changes the config, and its notification is lost.
	srv.Restart()
	writer := newStore(t, srv.Addr(), prefix, redisstore.WithoutPublish())
	t.Cleanup(func() { _ = writer.Close() })
	v2, err := writer.ReplaceConfig(ctx, testConfig("d", "d2"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "recovery", func() bool {
		if clock.Waiting() == 1 {
			clock.Advance(4 * time.Second)
		}
		return !r.Status().Degraded
	})
	if got := checks(reg, "ok"); got != 1 {
		t.Fatalf("%v successful checks, want 1", got)
	}
	if got := gatherCounter(reg, "switchyard_store_degraded", "", ""); got != 0 {
		t.Fatalf("degraded gauge = %v after recovery", got)
	}
	if got := gatherCounter(reg, "switchyard_store_replayed_releases_total", "", ""); got != held {
		t.Fatalf("replayed %v releases, want %d", got, held)
	}
	if st := readOne(t, writer, "d", "", t0); st.Metrics.InFlight != 0 {
		t.Fatalf("in-flight in Redis after recovery = %d, want 0 (releases replayed)", st.Metrics.InFlight)
	}
	awaitVersion(t, watch, v2, 5*time.Second)

	// Attempts started locally end locally, even though their outcome now goes to Redis.
	for i := range 100 {
		mustFinish(t, r, store.AttemptFinish{DeploymentID: "d", AttemptID: fmt.Sprint("local", i), RequestID: fmt.Sprint("l", i), Now: t0, Effect: store.EffectSuccess, Settings: defaults(), Latency: time.Second})
	}
	if st := readOne(t, writer, "d", "", t0); st.Metrics.Successes != 100 {
		t.Fatalf("outcomes after recovery did not reach Redis: %+v", st.Metrics)
	}
}

// TestResilientHungRedisCostsOneTimeout: a Redis that accepts connections but never answers
// (SIGSTOP) costs the first call one operation timeout; every call after it is local and
// immediate until Redis answers again.
func TestResilientHungRedisCostsOneTimeout(t *testing.T) {
	srv := redistest.Start(t)
	const opTimeout = 100 * time.Millisecond
	r, err := redisstore.NewResilient(newStore(t, srv.Addr(), redistest.Prefix(t), redisstore.WithOpTimeout(opTimeout)),
		redisstore.ResilientConfig{MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	ctx := t.Context()
	refs := []store.DeploymentRef{{ID: "d", Domain: "x"}}
	out := make([]store.DeploymentState, 1)
	if err := r.ReadStates(ctx, t0, refs, out); err != nil {
		t.Fatal(err)
	}

	srv.Pause()
	begin := time.Now()
	if err := r.ReadStates(ctx, t0, refs, out); err != nil {
		t.Fatalf("ReadStates with Redis hung: %v", err)
	}
	if d := time.Since(begin); d > opTimeout+2*time.Second { // slack: shared 2-core machine
		t.Fatalf("first call with Redis hung took %v, want about one %v timeout", d, opTimeout)
	}
	if !r.Status().Degraded {
		t.Fatal("not degraded after a timeout")
	}
	begin = time.Now()
	for i := range 50 {
		if _, err := r.AcquireProbe(ctx, "d", fmt.Sprint(i), t0, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// Waiting on the hung Redis would cost 50 timeouts (5 s); local calls take microseconds.
	if d := time.Since(begin); d > 10*opTimeout {
		t.Fatalf("50 degraded calls took %v: they wait on the hung Redis", d)
	}
	srv.Resume()
	eventually(t, 10*time.Second, "recovery after Resume", func() bool { return !r.Status().Degraded })
}
