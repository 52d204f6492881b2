package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// runRecovery holds a store to the circuit's recovery rules: a quarantine stays one across
// failed probes (behaviour §5.4, §5.6), outcomes of attempts older than the circuit's last
// transition change nothing (behaviour §5.5), and a probe whose owner ends without a verdict is
// free at once (behaviour §5.4).
func runRecovery(t *testing.T, f Factory) {
	t.Run("QuarantineKeepsItsCauseAndBaseAcrossReopens", func(t *testing.T) {
		s, replica := open(t, f)
		cs := settings()
		cs.ConfigurationCooldown = 40 * time.Second
		tr := finish(t, s, store.AttemptFinish{DeploymentID: "d1", RequestID: "bad-key", Now: t0, Effect: store.EffectConfiguration, Settings: cs})
		if !tr.Quarantined {
			t.Fatalf("configuration failure did not quarantine: %+v", tr)
		}
		now := tr.Circuit.OpenUntil
		// 40 s × 2^n, capped at maxCooldownSeconds (300 s); the cooldownSeconds base (5 s)
		// never applies to a quarantine.
		for i, want := range []time.Duration{80 * time.Second, 160 * time.Second, 300 * time.Second} {
			req := fmt.Sprintf("probe%d", i)
			if !acquire(t, s, "d1", req, now, cs.HalfOpenProbe) {
				t.Fatalf("round %d: probe refused at half-open", i)
			}
			tr := finish(t, s, store.AttemptFinish{DeploymentID: "d1", RequestID: req, Started: now, Now: now.Add(time.Second), Effect: store.EffectTransient, Settings: cs})
			if !tr.Reopened {
				t.Fatalf("round %d: failed probe did not reopen: %+v", i, tr)
			}
			end := now.Add(time.Second)
			if got := tr.Circuit.OpenUntil.Sub(end); got != want {
				t.Fatalf("round %d: cooldown %v, want %v (the quarantine's 40 s doubled, capped)", i, got, want)
			}
			// Another replica reads the cause back: routing stops with model_unavailable.
			if c := state(t, replica(), "d1", "", end).Circuit; c.Cause != store.CauseConfiguration || c.Reopens != uint32(i+1) {
				t.Fatalf("round %d: stored cause %v reopens %d, want configuration and %d", i, c.Cause, c.Reopens, i+1)
			}
			now = tr.Circuit.OpenUntil
		}
		// A successful probe ends the quarantine.
		acquire(t, s, "d1", "healed", now, cs.HalfOpenProbe)
		if tr := succeed(t, s, "d1", "healed", now, cs); !tr.Closed || tr.Circuit.Cause != store.CauseNone {
			t.Fatalf("successful probe after a quarantine: %+v", tr)
		}
	})

	t.Run("LateFailureAfterCloseChangesNothing", func(t *testing.T) {
		s, replica := open(t, f)
		cs := settings()
		cs.AllowedFails = 0
		// "slow" starts at t0 on a healthy deployment and fails only after recovery.
		slowStart := t0
		fail(t, s, "d1", "opener", t0.Add(time.Second), cs)
		half := t0.Add(time.Second + cs.Cooldown)
		if !acquire(t, s, "d1", "probe", half, cs.HalfOpenProbe) {
			t.Fatal("probe refused at half-open")
		}
		closedAt := half.Add(time.Second)
		if tr := finish(t, s, store.AttemptFinish{DeploymentID: "d1", RequestID: "probe", Started: half, Now: closedAt, Effect: store.EffectSuccess, Settings: cs, Latency: time.Second}); !tr.Closed {
			t.Fatalf("probe success did not close: %+v", tr)
		}
		if c := state(t, replica(), "d1", "", closedAt).Circuit; !c.ClosedAt.Equal(closedAt) {
			t.Fatalf("stored ClosedAt = %v, want %v (the close is the last transition)", c.ClosedAt, closedAt)
		}
		now := closedAt.Add(2 * time.Second)
		late := finish(t, s, store.AttemptFinish{DeploymentID: "d1", RequestID: "slow", Started: slowStart, Now: now, Effect: store.EffectTransient, Settings: cs})
		if late.Counted || late.Opened || late.Circuit.Open {
			t.Fatalf("a failure of an attempt started before the close changed the circuit: %+v", late)
		}
		lateKey := finish(t, s, store.AttemptFinish{DeploymentID: "d1", RequestID: "slow-key", Started: slowStart, Now: now, Effect: store.EffectConfiguration, Settings: cs})
		if lateKey.Quarantined || lateKey.Circuit.Open {
			t.Fatalf("a 401 of an attempt started before the close quarantined the deployment: %+v", lateKey)
		}
		if st := state(t, s, "d1", "", now); st.Circuit.State(now) != store.StateAvailable || st.Circuit.Failures != 0 {
			t.Fatalf("after late failures: %+v, want available with no count", st.Circuit)
		}
		// The request was not marked as counted: its next attempt, started after the close,
		// counts (behaviour §5.3 dedupes counted failures only).
		if tr := finish(t, s, store.AttemptFinish{DeploymentID: "d1", RequestID: "slow", Started: closedAt.Add(time.Second), Now: now, Effect: store.EffectTransient, Settings: cs}); !tr.Counted || !tr.Opened {
			t.Fatalf("a failure of an attempt started after the close did not open (allowedFails 0): %+v", tr)
		}
	})

	t.Run("FailureStartedAtTheTransitionCounts", func(t *testing.T) {
		s, _ := open(t, f)
		cs := settings()
		cs.AllowedFails = 0
		fail(t, s, "d1", "opener", t0, cs)
		half := t0.Add(cs.Cooldown)
		acquire(t, s, "d1", "probe", half, cs.HalfOpenProbe)
		// The probe's own attempt starts at the very instant the cooldown ended.
		if tr := finish(t, s, store.AttemptFinish{DeploymentID: "d1", RequestID: "probe", Started: half, Now: half.Add(time.Second), Effect: store.EffectTransient, Settings: cs}); !tr.Reopened {
			t.Fatalf("the probe's failure (started at the half-open transition) did not reopen: %+v", tr)
		}
		// Unknown start (zero): taken as started after any transition, here a close.
		s2, _ := open(t, f)
		fail(t, s2, "d2", "opener", t0, cs)
		acquire(t, s2, "d2", "probe", half, cs.HalfOpenProbe)
		if tr := succeed(t, s2, "d2", "probe", half, cs); !tr.Closed {
			t.Fatalf("probe success did not close: %+v", tr)
		}
		if tr := fail(t, s2, "d2", "r", half.Add(time.Second), cs); !tr.Opened {
			t.Fatalf("a failure with an unknown start after a close did not open: %+v", tr)
		}
	})

	for _, e := range []store.Effect{store.EffectNeutral, store.EffectThrottle, store.EffectQuota} {
		t.Run("ProbeReleasedWithoutAVerdict/"+e.String(), func(t *testing.T) {
			s, replica := open(t, f)
			cs := settings()
			cs.AllowedFails = 0
			fail(t, s, "d1", "opener", t0, cs)
			half := t0.Add(cs.Cooldown)
			if !acquire(t, s, "d1", "probe", half, cs.HalfOpenProbe) {
				t.Fatal("probe refused at half-open")
			}
			end := half.Add(2 * time.Second)
			// Another request ending the same way does not free someone else's probe.
			if tr := finish(t, s, store.AttemptFinish{DeploymentID: "d1", Domain: "acct", RequestID: "bystander", Started: half, Now: end, Effect: e, Settings: cs}); tr.ProbeReleased {
				t.Fatalf("a non-owner's %v released the probe: %+v", e, tr)
			}
			if acquire(t, replica(), "d1", "next", end, cs.HalfOpenProbe) {
				t.Fatal("the probe was handed over while its owner's attempt runs")
			}
			tr := finish(t, s, store.AttemptFinish{DeploymentID: "d1", Domain: "acct", RequestID: "probe", Started: half, Now: end, Effect: e, Settings: cs})
			if !tr.ProbeReleased || tr.Closed || tr.Reopened || tr.Circuit.ProbeOwner != "" {
				t.Fatalf("the owner's %v ending: %+v, want the probe released and the circuit still half-open", e, tr)
			}
			if st := state(t, replica(), "d1", "", end).Circuit; st.State(end) != store.StateHalfOpen {
				t.Fatalf("state after the release = %v, want half_open", st.State(end))
			}
			if !acquire(t, replica(), "d1", "next", end, cs.HalfOpenProbe) {
				t.Fatalf("the next request could not probe at once after the owner's %v ending", e)
			}
		})
	}
}
