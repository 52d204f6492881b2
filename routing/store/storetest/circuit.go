package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/routing/store"
)

func runCircuit(t *testing.T, f Factory) {
	t.Run("OpensWhenFailuresExceedAllowedFails", func(t *testing.T) {
		s, _ := open(t, f)
		cs := settings()
		for i := range 3 {
			tr := fail(t, s, "d1", fmt.Sprintf("r%d", i), t0.Add(time.Duration(i)*time.Second), cs)
			if !tr.Counted || tr.Opened {
				t.Fatalf("failure %d: counted=%v opened=%v, want counted and still closed", i+1, tr.Counted, tr.Opened)
			}
		}
		if got := state(t, s, "d1", "", t0.Add(3*time.Second)).Circuit.State(t0.Add(3 * time.Second)); got != store.StateAvailable {
			t.Fatalf("after allowedFails failures state = %v, want available", got)
		}
		now := t0.Add(4 * time.Second)
		tr := fail(t, s, "d1", "r3", now, cs)
		if !tr.Opened {
			t.Fatalf("4th failure with allowedFails=3 did not open the circuit: %+v", tr)
		}
		c := state(t, s, "d1", "", now).Circuit
		if c.State(now) != store.StateCooldown || c.Cause != store.CauseTransient {
			t.Fatalf("state=%v cause=%v, want cooldown/transient", c.State(now), c.Cause)
		}
		if ra := c.RetryAfter(now.Add(2 * time.Second)); ra != 3*time.Second {
			t.Fatalf("RetryAfter 2s into a 5s cooldown = %v, want exactly 3s", ra)
		}
		if st := c.State(now.Add(5 * time.Second)); st != store.StateHalfOpen {
			t.Fatalf("state when the cooldown ends = %v, want half_open", st)
		}
	})

	t.Run("AllowedFailsZeroOpensOnFirstFailure", func(t *testing.T) {
		s, _ := open(t, f)
		cs := settings()
		cs.AllowedFails = 0
		if tr := fail(t, s, "d1", "r1", t0, cs); !tr.Opened {
			t.Fatalf("allowedFails=0: first failure did not open: %+v", tr)
		}
	})

	t.Run("CooldownZeroNeverOpens", func(t *testing.T) {
		s, _ := open(t, f)
		cs := settings()
		cs.Cooldown = 0
		for i := range 10 {
			if tr := fail(t, s, "d1", fmt.Sprintf("r%d", i), t0, cs); tr.Opened {
				t.Fatalf("cooldownSeconds=0 opened the circuit at failure %d", i+1)
			}
		}
		if st := state(t, s, "d1", "", t0).Circuit.State(t0); st != store.StateAvailable {
			t.Fatalf("state = %v, want available", st)
		}
	})

	t.Run("FixedWindowResets", func(t *testing.T) {
		s, _ := open(t, f)
		cs := settings()
		cs.AllowedFails = 2
		// Two failures late in one window and two early in the next: a sliding window would
		// see four within 60 s; the fixed window (behaviour §5.1) sees two and two.
		fail(t, s, "d1", "a", t0, cs)
		fail(t, s, "d1", "b", t0.Add(50*time.Second), cs)
		if tr := fail(t, s, "d1", "c", t0.Add(55*time.Second), cs); !tr.Opened {
			t.Fatalf("3rd failure inside one window did not open with allowedFails=2: %+v", tr)
		}
		s2, _ := open(t, f)
		fail(t, s2, "d2", "a", t0, cs)
		fail(t, s2, "d2", "b", t0.Add(59*time.Second), cs)
		tr := fail(t, s2, "d2", "c", t0.Add(61*time.Second), cs) // new window
		if tr.Opened {
			t.Fatal("a failure in a new fixed window opened the circuit with counts of the old window")
		}
		tr = fail(t, s2, "d2", "d", t0.Add(70*time.Second), cs)
		if tr.Opened || tr.Circuit.Failures != 2 {
			t.Fatalf("window 2 count = %d opened=%v, want 2 and closed", tr.Circuit.Failures, tr.Opened)
		}
	})

	t.Run("SuccessClearsTheCount", func(t *testing.T) {
		s, _ := open(t, f)
		cs := settings()
		fail(t, s, "d1", "a", t0, cs)
		fail(t, s, "d1", "b", t0, cs)
		fail(t, s, "d1", "c", t0, cs)
		if tr := succeed(t, s, "d1", "ok", t0.Add(time.Second), cs); !tr.Cleared {
			t.Fatalf("success while closed did not clear the count: %+v", tr)
		}
		if tr := fail(t, s, "d1", "d", t0.Add(2*time.Second), cs); tr.Opened || tr.Circuit.Failures != 1 {
			t.Fatalf("after a success the next failure counts %d (opened=%v), want 1", tr.Circuit.Failures, tr.Opened)
		}
	})

	t.Run("OneFailurePerRequestAndDeployment", func(t *testing.T) {
		s, _ := open(t, f)
		cs := settings()
		cs.AllowedFails = 1
		for i := range 5 {
			tr := fail(t, s, "d1", "same-request", t0.Add(time.Duration(i)*time.Second), cs)
			if tr.Opened {
				t.Fatalf("repeated failures of one request opened the circuit at %d", i+1)
			}
			if tr.Counted != (i == 0) {
				t.Fatalf("failure %d counted=%v, want only the first counted", i+1, tr.Counted)
			}
		}
		// The same request on another deployment still counts there.
		if tr := fail(t, s, "d2", "same-request", t0, cs); !tr.Counted {
			t.Fatal("the request's failure on another deployment was not counted")
		}
	})

	t.Run("LateFailureCannotExtendOpenCircuit", func(t *testing.T) {
		s, _ := open(t, f)
		cs := settings()
		cs.AllowedFails = 0
		tr := fail(t, s, "d1", "a", t0, cs)
		until := tr.Circuit.OpenUntil
		late := fail(t, s, "d1", "b", t0.Add(3*time.Second), cs)
		if late.Counted || late.Opened || late.Reopened {
			t.Fatalf("late failure changed the open circuit: %+v", late)
		}
		if got := state(t, s, "d1", "", t0.Add(3*time.Second)).Circuit.OpenUntil; !got.Equal(until) {
			t.Fatalf("OpenUntil moved from %v to %v", until, got)
		}
		// Also while half-open: only the probe owner's failure counts.
		half := until.Add(time.Second)
		if !acquire(t, s, "d1", "probe", half, cs.HalfOpenProbe) {
			t.Fatal("probe not acquired at half-open")
		}
		if tr := fail(t, s, "d1", "c", half, cs); tr.Reopened || tr.Counted {
			t.Fatalf("a non-probe failure during half-open changed the circuit: %+v", tr)
		}
	})

	t.Run("HalfOpenProbe", func(t *testing.T) {
		s, _ := open(t, f)
		cs := settings()
		cs.AllowedFails = 0
		fail(t, s, "d1", "a", t0, cs)
		if acquire(t, s, "d1", "early", t0.Add(time.Second), cs.HalfOpenProbe) {
			t.Fatal("probe acquired during cooldown")
		}
		half := t0.Add(cs.Cooldown)
		if !acquire(t, s, "d1", "p1", half, cs.HalfOpenProbe) {
			t.Fatal("first probe request refused at half-open")
		}
		if acquire(t, s, "d1", "p2", half.Add(time.Second), cs.HalfOpenProbe) {
			t.Fatal("a second request got the probe while the first owns it")
		}
		if !acquire(t, s, "d1", "p1", half.Add(2*time.Second), cs.HalfOpenProbe) {
			t.Fatal("the owner was refused its own probe")
		}
		st := state(t, s, "d1", "", half.Add(time.Second)).Circuit
		if st.State(half.Add(time.Second)) != store.StateProbing {
			t.Fatalf("state with a live probe = %v, want probing", st.State(half.Add(time.Second)))
		}
		// The owner vanished: after the probe TTL another request takes over.
		expired := half.Add(cs.HalfOpenProbe)
		if !acquire(t, s, "d1", "p2", expired, cs.HalfOpenProbe) {
			t.Fatal("probe not handed over after its TTL expired")
		}
		// A successful probe closes the circuit.
		tr := succeed(t, s, "d1", "p2", expired.Add(time.Second), cs)
		if !tr.Closed {
			t.Fatalf("successful probe did not close the circuit: %+v", tr)
		}
		if st := state(t, s, "d1", "", expired.Add(time.Second)).Circuit; st.State(expired.Add(time.Second)) != store.StateAvailable || st.Reopens != 0 {
			t.Fatalf("after closing: %+v", st)
		}
	})

	t.Run("FailedProbeReopensExponentially", func(t *testing.T) {
		s, _ := open(t, f)
		cs := settings()
		cs.AllowedFails = 0
		cs.MaxCooldown = 30 * time.Second
		fail(t, s, "d1", "a", t0, cs)
		now := t0.Add(cs.Cooldown)
		want := []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second, 30 * time.Second}
		for i, w := range want {
			req := fmt.Sprintf("probe%d", i)
			if !acquire(t, s, "d1", req, now, cs.HalfOpenProbe) {
				t.Fatalf("round %d: probe refused", i)
			}
			tr := finish(t, s, store.AttemptFinish{DeploymentID: "d1", RequestID: req, Now: now, Effect: store.EffectTransient, Settings: cs, Jitter: 0})
			if !tr.Reopened {
				t.Fatalf("round %d: failed probe did not reopen: %+v", i, tr)
			}
			if got := tr.Circuit.OpenUntil.Sub(now); got != w {
				t.Fatalf("round %d: cooldown %v, want %v (5s×2^n capped at 30s)", i, got, w)
			}
			now = tr.Circuit.OpenUntil
		}
		// Jitter adds up to 25%, and never passes the cap.
		s2, _ := open(t, f)
		cs.MaxCooldown = 300 * time.Second
		fail(t, s2, "d9", "a", t0, cs)
		half := t0.Add(cs.Cooldown)
		acquire(t, s2, "d9", "p", half, cs.HalfOpenProbe)
		tr := finish(t, s2, store.AttemptFinish{DeploymentID: "d9", RequestID: "p", Now: half, Effect: store.EffectTransient, Settings: cs, Jitter: 0.999})
		got := tr.Circuit.OpenUntil.Sub(half)
		if got <= 10*time.Second || got > 12500*time.Millisecond {
			t.Fatalf("jittered cooldown %v, want in (10s, 12.5s]", got)
		}
	})

	t.Run("OnlyTheProbeOwnerCloses", func(t *testing.T) {
		s, _ := open(t, f)
		cs := settings()
		cs.AllowedFails = 0
		fail(t, s, "d1", "a", t0, cs)
		// Successes of requests that started before the circuit opened prove nothing.
		if tr := succeed(t, s, "d1", "old", t0.Add(time.Second), cs); tr.Closed || tr.Cleared {
			t.Fatalf("a success during the cooldown changed the circuit: %+v", tr)
		}
		half := t0.Add(cs.Cooldown)
		if !acquire(t, s, "d1", "probe", half, cs.HalfOpenProbe) {
			t.Fatal("probe not acquired at half-open")
		}
		if tr := succeed(t, s, "d1", "other", half.Add(time.Second), cs); tr.Closed {
			t.Fatalf("a non-owner's success closed the half-open circuit: %+v", tr)
		}
		if st := state(t, s, "d1", "", half.Add(time.Second)).Circuit.State(half.Add(time.Second)); st != store.StateProbing {
			t.Fatalf("state after a non-owner's success = %v, want probing", st)
		}
		if tr := succeed(t, s, "d1", "probe", half.Add(2*time.Second), cs); !tr.Closed {
			t.Fatalf("the owner's success did not close: %+v", tr)
		}
	})

	t.Run("DedupeLastsDedupeTTL", func(t *testing.T) {
		s, _ := open(t, f)
		cs := settings()
		cs.AllowedFails = 10
		f1 := store.AttemptFinish{DeploymentID: "d1", RequestID: "r", Effect: store.EffectTransient, Settings: cs, DedupeTTL: 10 * time.Second}
		for _, c := range []struct {
			at      time.Duration
			counted bool
		}{{0, true}, {9 * time.Second, false}, {10 * time.Second, true}} {
			f1.Now = t0.Add(c.at)
			if tr := finish(t, s, f1); tr.Counted != c.counted {
				t.Fatalf("failure of the same request at +%v: counted=%v, want %v (DedupeTTL 10s)", c.at, tr.Counted, c.counted)
			}
		}
	})

	t.Run("QuarantineIsNeverShortened", func(t *testing.T) {
		s, _ := open(t, f)
		cs := settings()
		tr := finish(t, s, store.AttemptFinish{DeploymentID: "d1", RequestID: "r", Now: t0, Effect: store.EffectConfiguration, Settings: cs})
		until := tr.Circuit.OpenUntil
		cs.ConfigurationCooldown = 60 * time.Second // settings changed meanwhile
		if tr := finish(t, s, store.AttemptFinish{DeploymentID: "d1", RequestID: "r2", Now: t0.Add(time.Second), Effect: store.EffectConfiguration, Settings: cs}); tr.Quarantined || !tr.Circuit.OpenUntil.Equal(until) {
			t.Fatalf("a shorter quarantine moved the end from %v: %+v", until, tr)
		}
		cs.ConfigurationCooldown = 600 * time.Second
		if tr := finish(t, s, store.AttemptFinish{DeploymentID: "d1", RequestID: "r3", Now: t0.Add(2 * time.Second), Effect: store.EffectConfiguration, Settings: cs}); !tr.Quarantined || tr.Circuit.OpenUntil.Sub(t0) != 602*time.Second {
			t.Fatalf("a longer quarantine did not extend: %+v", tr)
		}
	})

	t.Run("ConfigurationQuarantine", func(t *testing.T) {
		s, _ := open(t, f)
		cs := settings()
		tr := finish(t, s, store.AttemptFinish{DeploymentID: "d1", RequestID: "r", Now: t0, Effect: store.EffectConfiguration, Settings: cs})
		if !tr.Quarantined {
			t.Fatalf("configuration failure did not quarantine: %+v", tr)
		}
		st := state(t, s, "d1", "", t0.Add(time.Second))
		if st.Circuit.Cause != store.CauseConfiguration || st.Circuit.State(t0.Add(time.Second)) != store.StateCooldown {
			t.Fatalf("after quarantine: %+v", st.Circuit)
		}
		if got := st.Circuit.RetryAfter(t0); got != cs.ConfigurationCooldown {
			t.Fatalf("quarantine lasts %v, want configurationCooldownSeconds %v", got, cs.ConfigurationCooldown)
		}
		if st.Metrics.Failures != 0 {
			t.Fatalf("quarantine recorded %d health failures, want 0", st.Metrics.Failures)
		}
	})
}

func runCapacity(t *testing.T, f Factory) {
	t.Run("ThrottleCoolsTheWholeFailureDomain", func(t *testing.T) {
		s, replica := open(t, f)
		cs := settings()
		tr := finish(t, s, store.AttemptFinish{DeploymentID: "d1", Domain: "acct-1", RequestID: "r", Now: t0, Effect: store.EffectThrottle, Settings: cs, RetryAfter: 2 * time.Second})
		if !tr.CapacityOpened {
			t.Fatalf("429 did not open the capacity circuit: %+v", tr)
		}
		other := replica()
		now := t0.Add(time.Second)
		st := state(t, other, "d2", "acct-1", now)
		if !st.Capacity.Limited(now) {
			t.Fatal("another deployment of the same failure domain is not rate limited")
		}
		// max(throttleCooldownSeconds=5s, Retry-After=2s)
		if got := st.Capacity.Until.Sub(t0); got != 5*time.Second {
			t.Fatalf("capacity circuit lasts %v, want 5s", got)
		}
		if st := state(t, other, "d3", "acct-2", now); st.Capacity.Limited(now) {
			t.Fatal("a different failure domain is rate limited")
		}
		d1 := state(t, s, "d1", "acct-1", now)
		if d1.Metrics.Failures != 0 || d1.Circuit.Failures != 0 {
			t.Fatalf("throttle lowered health or counted a failure: %+v", d1)
		}
	})

	t.Run("RetryAfterLongerThanThrottleCooldown", func(t *testing.T) {
		s, _ := open(t, f)
		tr := finish(t, s, store.AttemptFinish{DeploymentID: "d1", Domain: "acct", RequestID: "r", Now: t0, Effect: store.EffectThrottle, Settings: settings(), RetryAfter: 42 * time.Second})
		if got := tr.Capacity.Until.Sub(t0); got != 42*time.Second {
			t.Fatalf("capacity lasts %v, want the provider's 42s", got)
		}
		// A shorter later throttle never shortens it.
		finish(t, s, store.AttemptFinish{DeploymentID: "d1", Domain: "acct", RequestID: "r2", Now: t0.Add(time.Second), Effect: store.EffectThrottle, Settings: settings()})
		if got := state(t, s, "d1", "acct", t0).Capacity.Until.Sub(t0); got != 42*time.Second {
			t.Fatalf("a shorter throttle moved the end to %v", got)
		}
	})

	t.Run("QuotaExhaustedIsALongOutage", func(t *testing.T) {
		s, _ := open(t, f)
		cs := settings()
		finish(t, s, store.AttemptFinish{DeploymentID: "d1", Domain: "acct", RequestID: "r", Now: t0, Effect: store.EffectQuota, Settings: cs})
		st := state(t, s, "d2", "acct", t0)
		if !st.Capacity.Quota || st.Capacity.Until.Sub(t0) != cs.ConfigurationCooldown {
			t.Fatalf("quota outage = %+v, want Quota for configurationCooldownSeconds", st.Capacity)
		}
	})
}
