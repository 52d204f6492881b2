package storetest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// reserve asks for a reservation and fails the test on error.
func reserve(t *testing.T, s store.Store, r store.Reservation) bool {
	t.Helper()
	ok, err := s.Reserve(ctx(t), r)
	if err != nil {
		t.Fatalf("Reserve(%+v): %v", r, err)
	}
	return ok
}

// startReserved starts attempt id on d1 at t0 as a reservation's attempt.
func startReserved(t *testing.T, s store.Store, id string) {
	t.Helper()
	if err := s.StartAttempt(ctx(t), store.AttemptStart{DeploymentID: "d1", AttemptID: id, Now: t0, Expires: t0.Add(time.Hour), Reserved: true}); err != nil {
		t.Fatalf("StartAttempt: %v", err)
	}
}

// runLimits holds stores to behaviour §4.1's hard limits: a reservation checks and counts in
// one step, whoever asks at the same moment.
func runLimits(t *testing.T, f Factory) {
	t.Run("ExactlyRPMLimitReservationsUnderConcurrency", func(t *testing.T) {
		s, replica := open(t, f)
		hs := handles(t, replica, 4)
		const limit = 5
		var won atomic.Int32
		Concurrently(50, func(i int) {
			ok, err := hs[i%len(hs)].Reserve(t.Context(), store.Reservation{DeploymentID: "d1", Now: t0.Add(time.Duration(i) * time.Millisecond), RPMLimit: limit})
			if err != nil {
				t.Errorf("Reserve: %v", err)
				return
			}
			if ok {
				won.Add(1)
			}
		})
		if n := won.Load(); n != limit {
			t.Fatalf("%d of 50 concurrent reservations under rpmLimit %d succeeded, want exactly %d", n, limit, limit)
		}
		if m := state(t, s, "d1", "", t0).Metrics; m.RPM != limit {
			t.Fatalf("rpm = %d after the reservations, want %d", m.RPM, limit)
		}
		// The next minute starts empty.
		if !reserve(t, s, store.Reservation{DeploymentID: "d1", Now: t0.Add(time.Minute), RPMLimit: limit}) {
			t.Fatal("reservation refused in the next minute")
		}
	})

	t.Run("TPMLimitCountsEstimatesUntilTheOutcome", func(t *testing.T) {
		s, _ := open(t, f)
		r := store.Reservation{DeploymentID: "d1", Now: t0, TPMLimit: 100, Tokens: 30}
		for i := range 4 { // 0, 30, 60, 90 are below 100
			if !reserve(t, s, r) {
				t.Fatalf("reservation %d refused below tpmLimit", i+1)
			}
		}
		if reserve(t, s, r) {
			t.Fatal("reservation granted at 120 reserved tokens, over tpmLimit 100")
		}
		if m := state(t, s, "d1", "", t0).Metrics; m.TPM != 120 || m.RPM != 4 {
			t.Fatalf("tpm=%d rpm=%d, want the 4 estimates (120) and 4 requests", m.TPM, m.RPM)
		}
		// Outcomes replace the estimates: a success with 10 real tokens, a failure with none.
		res := store.ReservedTokens{At: t0, Tokens: 30}
		startReserved(t, s, "a1")
		startReserved(t, s, "a2")
		success := store.AttemptFinish{DeploymentID: "d1", AttemptID: "a1", RequestID: "r1", Now: t0.Add(time.Second), Effect: store.EffectSuccess,
			Settings: settings(), Latency: time.Second, TotalTokens: 10, Reserved: res}
		failure := store.AttemptFinish{DeploymentID: "d1", AttemptID: "a2", RequestID: "r2", Now: t0.Add(time.Second), Effect: store.EffectTransient,
			Settings: settings(), Reserved: res}
		finish(t, s, success)
		finish(t, s, failure)
		// A second finish of an attempt (its attempt role and the trampoline both end a
		// transport failure) gives nothing back again.
		failure.Effect = store.EffectNeutral
		finish(t, s, failure)
		if m := state(t, s, "d1", "", t0.Add(time.Second)).Metrics; m.TPM != 70 || m.RPM != 4 {
			t.Fatalf("after two outcomes tpm=%d rpm=%d, want 120-30+10-30 = 70 and 4", m.TPM, m.RPM)
		}
		if !reserve(t, s, r) {
			t.Fatal("reservation refused after the outcomes gave tokens back")
		}
	})

	t.Run("ReservedStartCountsInFlightOnly", func(t *testing.T) {
		s, _ := open(t, f)
		if !reserve(t, s, store.Reservation{DeploymentID: "d1", Now: t0, RPMLimit: 1}) {
			t.Fatal("first reservation refused")
		}
		if err := s.StartAttempt(ctx(t), store.AttemptStart{DeploymentID: "d1", AttemptID: "a1", Now: t0, Expires: t0.Add(time.Hour), Reserved: true}); err != nil {
			t.Fatal(err)
		}
		if m := state(t, s, "d1", "", t0).Metrics; m.RPM != 1 || m.InFlight != 1 {
			t.Fatalf("rpm=%d in-flight=%d, want the request counted once and in flight", m.RPM, m.InFlight)
		}
	})

	t.Run("UnreserveGivesBackItsMinuteOnly", func(t *testing.T) {
		s, _ := open(t, f)
		r := store.Reservation{DeploymentID: "d1", Now: t0, RPMLimit: 1, TPMLimit: 1000, Tokens: 40}
		if !reserve(t, s, r) || reserve(t, s, r) {
			t.Fatal("rpmLimit 1 did not admit exactly one reservation")
		}
		if err := s.Unreserve(ctx(t), r); err != nil {
			t.Fatal(err)
		}
		if m := state(t, s, "d1", "", t0).Metrics; m.RPM != 0 || m.TPM != 0 {
			t.Fatalf("after unreserve rpm=%d tpm=%d, want 0 and 0", m.RPM, m.TPM)
		}
		if !reserve(t, s, r) {
			t.Fatal("reservation refused after the only one was given back")
		}
		// A reservation of a past minute gives nothing back from the current one.
		next := store.Reservation{DeploymentID: "d1", Now: t0.Add(time.Minute), RPMLimit: 5, Tokens: 7}
		if !reserve(t, s, next) {
			t.Fatal("reservation refused in the next minute")
		}
		if err := s.Unreserve(ctx(t), r); err != nil {
			t.Fatal(err)
		}
		startReserved(t, s, "late")
		finish(t, s, store.AttemptFinish{DeploymentID: "d1", AttemptID: "late", RequestID: "late", Now: t0.Add(time.Minute + time.Second), Effect: store.EffectSuccess,
			Settings: settings(), Latency: time.Second, TotalTokens: 25, Reserved: store.ReservedTokens{At: t0, Tokens: 40}})
		if m := state(t, s, "d1", "", t0.Add(time.Minute)).Metrics; m.RPM != 1 || m.TPM != 7+25 {
			t.Fatalf("next minute rpm=%d tpm=%d, want 1 and %d (the last minute's reservations stay there)", m.RPM, m.TPM, 7+25)
		}
	})

	t.Run("EveryReplicaSeesTheSameLimit", func(t *testing.T) {
		_, replica := open(t, f)
		hs := handles(t, replica, 3)
		var won int
		for i := range 9 {
			if reserve(t, hs[i%len(hs)], store.Reservation{DeploymentID: "d1", Now: t0, RPMLimit: 2}) {
				won++
			}
		}
		if won != 2 {
			t.Fatalf("%d reservations across 3 replicas under rpmLimit 2, want 2", won)
		}
	})
}
