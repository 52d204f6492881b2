package storetest

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/routing/store"
)

func start(t *testing.T, s store.Store, dep, attempt string, now, expires time.Time) {
	t.Helper()
	if err := s.StartAttempt(ctx(t), store.AttemptStart{DeploymentID: dep, AttemptID: attempt, Now: now, Expires: expires}); err != nil {
		t.Fatalf("StartAttempt: %v", err)
	}
}

func runMetrics(t *testing.T, f Factory) {
	t.Run("UnknownDeploymentReadsNeutral", func(t *testing.T) {
		s, _ := open(t, f)
		st := state(t, s, "nobody", "", t0)
		if st.Circuit.State(t0) != store.StateAvailable || st.Capacity.Limited(t0) {
			t.Fatalf("unknown deployment not available: %+v", st)
		}
		m := st.Metrics
		if m.InFlight != 0 || m.RPM != 0 || m.TPM != 0 || m.HasLatency || m.HasThroughput || m.HasHealth() {
			t.Fatalf("unknown deployment has metrics: %+v", m)
		}
		if m.HealthScore() != 0.5 {
			t.Fatalf("health with no data = %v, want neutral 0.5", m.HealthScore())
		}
	})

	t.Run("InFlightCountsAndExpires", func(t *testing.T) {
		s, _ := open(t, f)
		exp := t0.Add(time.Minute)
		start(t, s, "d1", "a1", t0, exp)
		start(t, s, "d1", "a2", t0, exp)
		start(t, s, "d1", "a3", t0, t0.Add(10*time.Second))
		if got := state(t, s, "d1", "", t0).Metrics.InFlight; got != 3 {
			t.Fatalf("in-flight = %d, want 3", got)
		}
		finish(t, s, store.AttemptFinish{DeploymentID: "d1", AttemptID: "a1", RequestID: "r1", Now: t0, Effect: store.EffectNeutral, Settings: settings()})
		// Finishing twice, or an attempt never started, changes nothing.
		finish(t, s, store.AttemptFinish{DeploymentID: "d1", AttemptID: "a1", RequestID: "r1", Now: t0, Effect: store.EffectNeutral, Settings: settings()})
		finish(t, s, store.AttemptFinish{DeploymentID: "d1", AttemptID: "ghost", RequestID: "r9", Now: t0, Effect: store.EffectNeutral, Settings: settings()})
		if got := state(t, s, "d1", "", t0).Metrics.InFlight; got != 2 {
			t.Fatalf("in-flight after one finish = %d, want 2", got)
		}
		// a3 was never finished (a crashed replica): it stops counting at its expiry.
		if got := state(t, s, "d1", "", t0.Add(10*time.Second)).Metrics.InFlight; got != 1 {
			t.Fatalf("in-flight after a3 expired = %d, want 1", got)
		}
		if got := state(t, s, "d1", "", exp).Metrics.InFlight; got != 0 {
			t.Fatalf("in-flight after every entry expired = %d, want 0", got)
		}
	})

	t.Run("RPMAndTPMPerMinute", func(t *testing.T) {
		s, _ := open(t, f)
		for i := range 4 {
			start(t, s, "d1", fmt.Sprintf("a%d", i), t0.Add(time.Duration(i)*time.Second), t0.Add(time.Hour))
		}
		finish(t, s, store.AttemptFinish{DeploymentID: "d1", AttemptID: "a0", RequestID: "r0", Now: t0.Add(5 * time.Second), Effect: store.EffectSuccess, Settings: settings(), Latency: time.Second, CompletionTokens: 10, TotalTokens: 30})
		finish(t, s, store.AttemptFinish{DeploymentID: "d1", AttemptID: "a1", RequestID: "r1", Now: t0.Add(6 * time.Second), Effect: store.EffectSuccess, Settings: settings(), Latency: time.Second, CompletionTokens: 5, TotalTokens: 12})
		// A failure adds no tokens (behaviour §3.2: TPM adds totalTokens on success).
		finish(t, s, store.AttemptFinish{DeploymentID: "d1", AttemptID: "a2", RequestID: "r2", Now: t0.Add(7 * time.Second), Effect: store.EffectTransient, Settings: settings(), TotalTokens: 999})
		m := state(t, s, "d1", "", t0.Add(30*time.Second)).Metrics
		if m.RPM != 4 || m.TPM != 42 {
			t.Fatalf("rpm=%d tpm=%d, want 4 and 42", m.RPM, m.TPM)
		}
		next := t0.Add(time.Minute)
		if m := state(t, s, "d1", "", next).Metrics; m.RPM != 0 || m.TPM != 0 {
			t.Fatalf("next minute rpm=%d tpm=%d, want 0 and 0", m.RPM, m.TPM)
		}
	})

	t.Run("EWMALatencyAndThroughput", func(t *testing.T) {
		s, _ := open(t, f)
		finish(t, s, store.AttemptFinish{DeploymentID: "d1", RequestID: "r1", Now: t0, Effect: store.EffectSuccess, Settings: settings(), Latency: 2 * time.Second, CompletionTokens: 100})
		m := state(t, s, "d1", "", t0).Metrics
		if !m.HasLatency || !near(m.LatencyEWMA, 2) || !m.HasThroughput || !near(m.ThroughputEWMA, 50) {
			t.Fatalf("first sample: %+v, want latency 2s and throughput 50 tok/s as is", m)
		}
		finish(t, s, store.AttemptFinish{DeploymentID: "d1", RequestID: "r2", Now: t0, Effect: store.EffectSuccess, Settings: settings(), Latency: 4 * time.Second, CompletionTokens: 400})
		m = state(t, s, "d1", "", t0).Metrics
		// α = 0.2: 0.2×4 + 0.8×2 = 2.4 s; 0.2×100 + 0.8×50 = 60 tok/s.
		if !near(m.LatencyEWMA, 2.4) || !near(m.ThroughputEWMA, 60) {
			t.Fatalf("second sample: latency %v throughput %v, want 2.4 and 60", m.LatencyEWMA, m.ThroughputEWMA)
		}
		// Failures do not move the averages; a success without tokens leaves throughput alone.
		finish(t, s, store.AttemptFinish{DeploymentID: "d1", RequestID: "r3", Now: t0, Effect: store.EffectTransient, Settings: settings(), Latency: time.Hour})
		finish(t, s, store.AttemptFinish{DeploymentID: "d1", RequestID: "r4", Now: t0, Effect: store.EffectSuccess, Settings: settings(), Latency: 2400 * time.Millisecond})
		m = state(t, s, "d1", "", t0).Metrics
		if !near(m.LatencyEWMA, 2.4) || !near(m.ThroughputEWMA, 60) {
			t.Fatalf("after a failure and a token-less success: latency %v throughput %v", m.LatencyEWMA, m.ThroughputEWMA)
		}
	})

	t.Run("HealthWindow", func(t *testing.T) {
		s, _ := open(t, f)
		for i := range 3 {
			succeed(t, s, "d1", fmt.Sprintf("s%d", i), t0, settings())
		}
		fail(t, s, "d1", "f0", t0.Add(2*time.Minute), settings())
		m := state(t, s, "d1", "", t0.Add(3*time.Minute)).Metrics
		if m.Successes != 3 || m.Failures != 1 || !near(m.HealthScore(), 0.75) {
			t.Fatalf("health = %d/%d score %v, want 3/1 and 0.75", m.Successes, m.Failures, m.HealthScore())
		}
		// Ten minutes after t0's minute the successes have left the window.
		m = state(t, s, "d1", "", t0.Add(10*time.Minute)).Metrics
		if m.Successes != 0 || m.Failures != 1 {
			t.Fatalf("after 10 minutes = %d/%d, want 0/1", m.Successes, m.Failures)
		}
		m = state(t, s, "d1", "", t0.Add(12*time.Minute)).Metrics
		if m.HasHealth() || m.HealthScore() != 0.5 {
			t.Fatalf("after the window emptied: %+v score %v, want neutral 0.5", m, m.HealthScore())
		}
	})

	t.Run("HealthBucketsReuseTheirSlot", func(t *testing.T) {
		// Minute m and m+HealthBuckets share a slot (store.HealthSlot): the newer minute
		// replaces the older, and a lagging replica's write for the older minute is dropped
		// rather than wiping the newer one.
		s, replica := open(t, f)
		span := time.Duration(store.HealthBuckets) * time.Minute
		succeed(t, s, "d1", "old1", t0, settings())
		succeed(t, s, "d1", "old2", t0, settings())
		fail(t, s, "d1", "new", t0.Add(span), settings())
		if m := state(t, replica(), "d1", "", t0.Add(span)).Metrics; m.Successes != 0 || m.Failures != 1 {
			t.Fatalf("after the slot's reuse = %d/%d, want 0/1", m.Successes, m.Failures)
		}
		succeed(t, s, "d1", "lagging", t0.Add(30*time.Second), settings())
		if m := state(t, replica(), "d1", "", t0.Add(span)).Metrics; m.Successes != 0 || m.Failures != 1 {
			t.Fatalf("after a write for the slot's older minute = %d/%d, want 0/1 (the write is dropped)", m.Successes, m.Failures)
		}
		// Every other slot is untouched: the window holds one bucket per minute.
		for i := 1; i < store.HealthBuckets; i++ {
			succeed(t, s, "d1", fmt.Sprintf("m%d", i), t0.Add(span+time.Duration(i)*time.Minute), settings())
		}
		end := t0.Add(span + time.Duration(store.HealthBuckets-1)*time.Minute)
		if m := state(t, replica(), "d1", "", end).Metrics; m.Successes != int64(store.HealthBuckets-1) || m.Failures != 1 {
			t.Fatalf("a full window = %d/%d, want %d/1", m.Successes, m.Failures, store.HealthBuckets-1)
		}
	})

	t.Run("ReadManyInOneCall", func(t *testing.T) {
		s, _ := open(t, f)
		refs := make([]store.DeploymentRef, 8)
		for i := range refs {
			refs[i] = store.DeploymentRef{ID: fmt.Sprintf("d%d", i), Domain: store.DomainOf(fmt.Sprintf("d%d", i), "")}
			for j := 0; j < i; j++ {
				start(t, s, refs[i].ID, fmt.Sprintf("a%d-%d", i, j), t0, t0.Add(time.Minute))
			}
		}
		out := make([]store.DeploymentState, len(refs))
		if err := s.ReadStates(ctx(t), t0, refs, out); err != nil {
			t.Fatal(err)
		}
		for i := range refs {
			if out[i].Metrics.InFlight != int64(i) {
				t.Fatalf("out[%d].InFlight = %d, want %d (states must line up with refs)", i, out[i].Metrics.InFlight, i)
			}
		}
	})
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }
