// Package memstore is the embedded, in-process Store: the default for a single switchyard
// replica and the reference the Redis store is held to by the conformance suite.
//
// All state sits behind one mutex. Circuit transitions use the reference functions of
// package store, so the memory store is the executable form of behaviour §5.
package memstore

import (
	"context"
	"sync"
	"time"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// Store is an in-memory store.Store. The zero value is not usable; call New.
type Store struct {
	mu       sync.Mutex
	deps     map[string]*deployment
	domains  map[string]store.Capacity
	config   configState
	clients  map[string]store.ClientKey
	watchers store.Broadcaster
	revoked  store.Fanout
}

var _ store.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{
		deps:    make(map[string]*deployment),
		domains: make(map[string]store.Capacity),
		config:  newConfigState(),
		clients: make(map[string]store.ClientKey),
	}
}

// Close implements store.Store.
func (s *Store) Close() error {
	s.watchers.Close()
	s.revoked.Close()
	return nil
}

// deployment is the live state of one deployment.
type deployment struct {
	circuit store.Circuit

	inFlight   map[string]time.Time // attempt id → expiry (behaviour §3.1)
	nextExpiry time.Time            // earliest expiry in inFlight, to sweep lazily

	minute int64 // bucket of rpm/tpm
	rpm    int64
	tpm    int64

	latency, throughput       float64
	hasLatency, hasThroughput bool

	health [store.HealthBuckets]store.HealthBucket

	// counted remembers requests that already counted a failure (behaviour §5.3).
	counted      map[string]time.Time
	countedSweep time.Time
}

func (s *Store) dep(id string) *deployment {
	d := s.deps[id]
	if d == nil {
		d = &deployment{inFlight: make(map[string]time.Time), counted: make(map[string]time.Time)}
		s.deps[id] = d
	}
	return d
}

// ReadStates implements store.States.
func (s *Store) ReadStates(_ context.Context, now time.Time, refs []store.DeploymentRef, out []store.DeploymentState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	minute := store.MinuteOf(now)
	for i, ref := range refs {
		out[i] = store.DeploymentState{Capacity: s.domains[ref.Domain]}
		d := s.deps[ref.ID]
		if d == nil {
			continue
		}
		d.sweepInFlight(now)
		m := &out[i].Metrics
		m.InFlight = int64(len(d.inFlight))
		if d.minute == minute {
			m.RPM, m.TPM = d.rpm, d.tpm
		}
		m.LatencyEWMA, m.HasLatency = d.latency, d.hasLatency
		m.ThroughputEWMA, m.HasThroughput = d.throughput, d.hasThroughput
		for _, b := range d.health {
			if store.InHealthWindow(b.Minute, minute) {
				m.Successes += b.Successes
				m.Failures += b.Failures
			}
		}
		out[i].Circuit = d.circuit
	}
	return nil
}

// StartAttempt implements store.Attempts.
func (s *Store) StartAttempt(_ context.Context, a store.AttemptStart) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.dep(a.DeploymentID)
	d.sweepInFlight(a.Now)
	d.inFlight[a.AttemptID] = a.Expires
	if d.nextExpiry.IsZero() || a.Expires.Before(d.nextExpiry) {
		d.nextExpiry = a.Expires
	}
	if !a.Reserved {
		d.rollMinute(a.Now)
		d.rpm++
	}
	return nil
}

// Reserve implements store.Attempts: check and count under the store's lock.
func (s *Store) Reserve(_ context.Context, r store.Reservation) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.dep(r.DeploymentID)
	d.rollMinute(r.Now)
	if (r.RPMLimit > 0 && d.rpm >= r.RPMLimit) || (r.TPMLimit > 0 && d.tpm >= r.TPMLimit) {
		return false, nil
	}
	d.rpm++
	d.tpm += max(r.Tokens, 0)
	return true, nil
}

// Unreserve implements store.Attempts.
func (s *Store) Unreserve(_ context.Context, r store.Reservation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.deps[r.DeploymentID]; d != nil && d.minute == store.MinuteOf(r.Now) {
		d.rpm = max(d.rpm-1, 0)
		d.tpm = max(d.tpm-max(r.Tokens, 0), 0)
	}
	return nil
}

// FinishAttempt implements store.Attempts.
func (s *Store) FinishAttempt(_ context.Context, f store.AttemptFinish) (store.Transition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.dep(f.DeploymentID)
	exp, live := d.inFlight[f.AttemptID]
	live = live && f.Now.Before(exp)
	delete(d.inFlight, f.AttemptID)
	if live && f.Reserved.Tokens > 0 && d.minute == store.MinuteOf(f.Reserved.At) {
		// The estimate gives way to the real usage (a success adds it below), once: an
		// attempt may be finished twice (its attempt role and the trampoline).
		d.tpm = max(d.tpm-f.Reserved.Tokens, 0)
	}

	var t store.Transition
	switch f.Effect {
	case store.EffectSuccess:
		d.recordHealth(f.Now, true)
		d.circuit, t = store.ApplySuccess(d.circuit, f.RequestID, f.Now)
		d.latency = store.EWMA(d.latency, d.hasLatency, f.Latency.Seconds())
		d.hasLatency = true
		if tp, ok := store.Throughput(f.CompletionTokens, f.Latency); ok {
			d.throughput = store.EWMA(d.throughput, d.hasThroughput, tp)
			d.hasThroughput = true
		}
		d.rollMinute(f.Now)
		d.tpm += max(f.TotalTokens, 0)
	case store.EffectTransient:
		d.recordHealth(f.Now, false)
		d.circuit, t = store.ApplyFailure(d.circuit, store.Failure{
			RequestID: f.RequestID, FirstForRequest: !d.alreadyCounted(f.RequestID, f.Now),
			Started: f.Started, Now: f.Now, Jitter: f.Jitter,
		}, f.Settings)
		if t.Counted {
			d.markCounted(f.RequestID, f.Now, f.DedupeTTL)
		}
	case store.EffectConfiguration:
		d.circuit, t = store.ApplyConfigurationFailure(d.circuit, f.Started, f.Now, f.Settings)
	case store.EffectThrottle, store.EffectQuota:
		dur := store.CapacityCooldown(f.Effect, f.Settings, f.RetryAfter)
		var opened bool
		s.domains[f.Domain], opened = store.ApplyCapacity(s.domains[f.Domain], f.Now, dur, f.Effect == store.EffectQuota)
		t = store.Transition{CapacityOpened: opened, Capacity: s.domains[f.Domain]}
	}
	switch f.Effect {
	case store.EffectNeutral, store.EffectThrottle, store.EffectQuota:
		// No verdict on recovery: a probe this attempt owned is free again (behaviour §5.4).
		d.circuit, t.ProbeReleased = store.ReleaseProbe(d.circuit, f.RequestID, f.Now)
		t.Circuit = d.circuit
	}
	return t, nil
}

// AcquireProbe implements store.Probes.
func (s *Store) AcquireProbe(_ context.Context, deploymentID, requestID string, now time.Time, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.deps[deploymentID]
	if d == nil {
		return false, nil
	}
	var ok bool
	d.circuit, ok = store.AcquireProbe(d.circuit, requestID, now, ttl)
	return ok, nil
}

func (d *deployment) sweepInFlight(now time.Time) {
	if d.nextExpiry.IsZero() || now.Before(d.nextExpiry) {
		return
	}
	d.nextExpiry = time.Time{}
	for id, exp := range d.inFlight {
		if !now.Before(exp) {
			delete(d.inFlight, id)
			continue
		}
		if d.nextExpiry.IsZero() || exp.Before(d.nextExpiry) {
			d.nextExpiry = exp
		}
	}
}

func (d *deployment) rollMinute(now time.Time) {
	if m := store.MinuteOf(now); m != d.minute {
		d.minute, d.rpm, d.tpm = m, 0, 0
	}
}

func (d *deployment) recordHealth(now time.Time, success bool) {
	minute := store.MinuteOf(now)
	d.health[store.HealthSlot(minute)].Record(minute, success)
}

// alreadyCounted reports whether requestID already counted a failure here (behaviour §5.3).
func (d *deployment) alreadyCounted(requestID string, now time.Time) bool {
	exp, ok := d.counted[requestID]
	return ok && now.Before(exp)
}

// markCounted remembers that requestID counted a failure here, for ttl (default one hour).
func (d *deployment) markCounted(requestID string, now time.Time, ttl time.Duration) {
	if !now.Before(d.countedSweep) {
		for id, exp := range d.counted {
			if !now.Before(exp) {
				delete(d.counted, id)
			}
		}
		d.countedSweep = now.Add(time.Minute)
	}
	if ttl <= 0 {
		ttl = store.DefaultDedupeTTL
	}
	d.counted[requestID] = now.Add(ttl)
}
