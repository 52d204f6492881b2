// Package store owns the shared routing state switchyard keeps per deployment and per failure
// domain (behaviour §3–§5) and the persisted configuration (behaviour §11.2), behind the Store interface
// the routing core needs.
//
// Two implementations pass one conformance suite (package storetest): memstore, the embedded
// default for a single replica, and redisstore, for many replicas sharing one Redis.
//
// Stores never read a clock: every call carries `now`, so the routing core's injected clock
// (a fake one in tests) is the only source of time, and every transition is computed from
// stored timestamps rather than from key expiry. Key expiry (TTLs) is only garbage
// collection, except where docs/behaviour.md asks for self-expiring state (in-flight entries, behaviour §3.1).
package store

import (
	"context"
	"errors"
	"time"
)

// Store is everything the routing core reads and writes.
type Store interface {
	States
	Attempts
	Probes
	ConfigStore
	ClientKeys
	// Close releases the store's resources.
	Close() error
}

// States reads the live state of routing candidates.
type States interface {
	// ReadStates fills out[i] with the state of refs[i] as of now: circuit, failure-domain
	// capacity circuit and metrics. It reads everything fresh (no client-side cache, behaviour §3)
	// and costs one round trip to a shared store. len(out) must be ≥ len(refs).
	ReadStates(ctx context.Context, now time.Time, refs []DeploymentRef, out []DeploymentState) error
}

// Attempts records the life of upstream attempts: metrics (behaviour §3) and circuit transitions
// (behaviour §5).
type Attempts interface {
	// StartAttempt counts an attempt in flight until Finish or until expires (behaviour §3.1), and
	// counts it in the current minute's requests (behaviour §3.2).
	StartAttempt(ctx context.Context, a AttemptStart) error
	// FinishAttempt ends an attempt: it releases the in-flight entry and applies the effect of
	// the outcome atomically. It is safe to call for an attempt that was never started or
	// already finished (the in-flight release is then a no-op).
	FinishAttempt(ctx context.Context, f AttemptFinish) (Transition, error)
	// Reserve counts one request and r.Tokens in the minute of r.Now if that minute's requests
	// are below r.RPMLimit and its tokens below r.TPMLimit (a limit of 0 is none), and reports
	// whether it did. Check and count are one atomic step across every replica, so concurrent
	// callers never pass a limit together (behaviour §4.1). The attempt then starts with
	// AttemptStart.Reserved and finishes with AttemptFinish.Reserved.
	Reserve(ctx context.Context, r Reservation) (bool, error)
	// Unreserve gives back a reservation whose attempt never started, if its minute is still
	// the current one.
	Unreserve(ctx context.Context, r Reservation) error
}

// Probes hands out half-open probe ownership (behaviour §5.4).
type Probes interface {
	// AcquireProbe makes requestID the owner of deployment's recovery probe when the circuit
	// is half-open and the probe is free, expired, or already owned by requestID. It reports
	// whether requestID owns the probe now. Exactly one caller wins under concurrency.
	AcquireProbe(ctx context.Context, deploymentID, requestID string, now time.Time, ttl time.Duration) (bool, error)
}

// DeploymentRef names what to read for one candidate.
type DeploymentRef struct {
	ID string
	// Domain is the failure domain whose capacity circuit applies (behaviour §4.3); use
	// DomainOf to default it.
	Domain string
}

// DomainOf returns the failure domain of a deployment: its declared failureDomain, or its own
// identity when it has none (behaviour §4.3: "Deployments without it are their own domain").
// Implicit domains live under ImplicitDomainPrefix, whose '/' the failureDomain schema rule
// forbids (proto/switchyard/config/v1/config.proto), so no configured value can join them.
func DomainOf(deploymentID, failureDomain string) string {
	if failureDomain != "" {
		return failureDomain
	}
	return ImplicitDomainPrefix + deploymentID
}

// ImplicitDomainPrefix starts the failure domain of a deployment without a failureDomain.
const ImplicitDomainPrefix = "deployment/"

// DeploymentState is one candidate's live state.
type DeploymentState struct {
	Circuit  Circuit
	Capacity Capacity
	Metrics  Metrics
}

// ErrUnavailable marks failures of the shared store itself (unreachable, timed out). Callers
// degrade to local state instead of failing requests.
var ErrUnavailable = errors.New("store unavailable")
