// Package storetest is the conformance suite every store.Store implementation must pass: the
// circuit state machine of behaviour §5, the metrics of behaviour §3 and the configuration persistence
// of behaviour §11.2, asserted through the interface only.
//
// A store under test is given by a Factory. Calling the replica function it returns several
// times must give handles onto the same shared state, the way several switchyard replicas
// share one Redis; the concurrency tests spread their callers over several handles.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// Factory prepares an empty shared state for one test and returns a function that opens a
// handle (a replica) onto it. Handles are closed by the suite.
type Factory func(t *testing.T) (replica func() store.Store)

// Run runs the whole suite.
func Run(t *testing.T, f Factory) {
	t.Run("Circuit", func(t *testing.T) { runCircuit(t, f) })
	t.Run("Recovery", func(t *testing.T) { runRecovery(t, f) })
	t.Run("Capacity", func(t *testing.T) { runCapacity(t, f) })
	t.Run("Metrics", func(t *testing.T) { runMetrics(t, f) })
	t.Run("Concurrency", func(t *testing.T) { runConcurrency(t, f) })
	t.Run("Limits", func(t *testing.T) { runLimits(t, f) })
	t.Run("Config", func(t *testing.T) { runConfig(t, f) })
	t.Run("ClientKeys", func(t *testing.T) { runClientKeys(t, f) })
}

// t0 is a fixed instant: stores take time from callers, so the suite never waits on a clock.
var t0 = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

// settings mirror behaviour §5's defaults.
func settings() store.CircuitSettings {
	return store.CircuitSettings{
		AllowedFails:          3,
		Cooldown:              5 * time.Second,
		FailureWindow:         60 * time.Second,
		MaxCooldown:           300 * time.Second,
		HalfOpenProbe:         30 * time.Second,
		ConfigurationCooldown: 300 * time.Second,
		ThrottleCooldown:      5 * time.Second,
	}
}

// open returns one handle that the test cleanup closes.
func open(t *testing.T, f Factory) (store.Store, func() store.Store) {
	t.Helper()
	replica := f(t)
	handle := func() store.Store {
		s := replica()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	return handle(), handle
}

func ctx(t *testing.T) context.Context { return t.Context() }

// state reads one deployment's state.
func state(t *testing.T, s store.Store, id, domain string, now time.Time) store.DeploymentState {
	t.Helper()
	out := make([]store.DeploymentState, 1)
	if err := s.ReadStates(ctx(t), now, []store.DeploymentRef{{ID: id, Domain: domain}}, out); err != nil {
		t.Fatalf("ReadStates(%s): %v", id, err)
	}
	return out[0]
}

// finish records an outcome and fails the test on error.
func finish(t *testing.T, s store.Store, f store.AttemptFinish) store.Transition {
	t.Helper()
	if f.Domain == "" {
		f.Domain = store.DomainOf(f.DeploymentID, "")
	}
	if f.AttemptID == "" {
		f.AttemptID = f.RequestID + "/" + f.DeploymentID
	}
	tr, err := s.FinishAttempt(ctx(t), f)
	if err != nil {
		t.Fatalf("FinishAttempt(%+v): %v", f, err)
	}
	return tr
}

func fail(t *testing.T, s store.Store, dep, req string, now time.Time, cs store.CircuitSettings) store.Transition {
	t.Helper()
	return finish(t, s, store.AttemptFinish{DeploymentID: dep, RequestID: req, Now: now, Effect: store.EffectTransient, Settings: cs})
}

func succeed(t *testing.T, s store.Store, dep, req string, now time.Time, cs store.CircuitSettings) store.Transition {
	t.Helper()
	return finish(t, s, store.AttemptFinish{DeploymentID: dep, RequestID: req, Now: now, Effect: store.EffectSuccess, Settings: cs, Latency: time.Second})
}

func acquire(t *testing.T, s store.Store, dep, req string, now time.Time, ttl time.Duration) bool {
	t.Helper()
	ok, err := s.AcquireProbe(ctx(t), dep, req, now, ttl)
	if err != nil {
		t.Fatalf("AcquireProbe: %v", err)
	}
	return ok
}
