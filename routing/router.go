// Package routing is switchyard's brain: for every attempt of a request it decides what to
// do next (attempt on deployment D after a wait W with per-attempt timeouts, or stop with
// error E), and it keeps the metrics and circuits that the next decisions read. It knows
// nothing of Envoy, gRPC or ext_proc; those call it.
//
// # The decision flow
//
// Router.Decide takes the request's facts and what has happened so far (History: one record
// per finished attempt) and returns a Decision. It reads as this list: one per-decision value
// (decision) carries the request, its history and the Decision being built through the steps
// ended, spent, plan, readStates, assess, firstPass, reuse, allOpen and blocked.
//
//  1. Stop early when the last outcome ends the request: a request fault (behaviour §7.3) or a
//     cancel; a context-window or content-policy refusal switches to that reason's fallback
//     chain instead when one exists (behaviour §7.6). Stop when the attempt budget (maxAttempts) is
//     spent or the deadline (totalMs) leaves no room for a meaningful attempt (behaviour §6.4).
//  2. Plan the hops: the public model, then its fallback chain for the current reason
//     (behaviour §7.6), minus models that refused the request, unless the model's policy forbids
//     cross-model fallback (behaviour §9.3). Deployments that cannot keep the request's capability
//     contract are skipped and the skip is recorded (behaviour §9.2).
//  3. Read the live state of every candidate of every hop in one store call (one round trip,
//     behaviour §3) and keep the eligible ones: enabled, circuit not open, failure domain not
//     rate limited, under rpm/tpm limits (behaviour §4.1).
//  4. First pass (behaviour §7.1): the first hop with an eligible deployment this request has not
//     tried yet wins, at once. Failover comes before fallback (behaviour §7.7) because hops are in
//     order. The strategy (behaviour §2) picks among that hop's untried eligible deployments;
//     a pick with rpmLimit/tpmLimit must reserve its share of the minute (one request, the
//     token estimate) in the store, atomically with the limit check, or is dropped as over
//     its limits (behaviour §4.1: hard limits); a half-open pick must win the probe
//     (behaviour §5.4) or is dropped. Capability, policy (the client key's allow-list) and limit
//     skips are recorded in the Decision (behaviour §9.2).
//  5. Reuse (behaviour §7.2): otherwise a deployment already tried is asked again after a wait of
//     0.5 s doubling (per deployment) to 8 s, floored by retryAfterSeconds and the provider's
//     Retry-After (≤60 s), plus up to 25% jitter, and not before its failure domain's capacity
//     circuit reopens (≤60 s), if the wait still leaves a meaningful attempt in the
//     candidate's window (the deadline, or its deployment's lower totalMs).
//  6. Nothing eligible: with whenAllOpen "try" the circuits (never a probe another request
//     owns) are ignored for one more pass;
//     otherwise stop with what the provider said last (behaviour §7.4), or, when no upstream was
//     asked, with 429 rate_limit_exceeded / 503 model_overloaded + Retry-After /
//     503 model_unavailable (behaviour §4.2, §7.5).
//
// The caller starts the attempt with StartAttempt (with the decision's reservation, or gives
// the reservation back with Unreserve when it does not make the attempt), classifies its
// outcome with package failure, records it with FinishAttempt (metrics and circuits,
// behaviour §3, §5) and adds it to the History with History.Record.
package routing

import (
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/switchyard-gw/switchyard/internal/clock"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// Rand is a source of uniform floats in [0,1), safe for concurrent use. Tests inject a
// seeded one.
type Rand interface{ Float64() float64 }

// SystemRand draws from math/rand/v2's goroutine-safe global source.
type SystemRand struct{}

// Float64 implements Rand.
func (SystemRand) Float64() float64 { return rand.Float64() }

// ConfigSource hands out the configuration in force; *config.Live implements it.
type ConfigSource interface{ Load() *config.Snapshot }

// Store is what the router needs from the shared state.
type Store interface {
	store.States
	store.Attempts
	store.Probes
}

// Router decides attempts and records their outcomes. It is safe for concurrent use.
type Router struct {
	config ConfigSource
	store  Store
	clock  clock.Clock
	rand   Rand
	log    *slog.Logger
	// recordTimeout bounds the store calls that record an attempt (Options.RecordTimeout).
	recordTimeout time.Duration

	scratch sync.Pool // *scratch, reused across decisions to keep them allocation-light
}

// Options configure a Router. Zero fields take the system defaults.
type Options struct {
	Clock  clock.Clock
	Rand   Rand
	Logger *slog.Logger
	// RecordTimeout bounds StartAttempt and FinishAttempt, which run detached from their
	// caller's cancellation (default DefaultRecordTimeout).
	RecordTimeout time.Duration
}

// DefaultRecordTimeout bounds recording an attempt: several store operations (a Redis one of
// 250 ms at most, then the local fallback), far below any request's budget.
const DefaultRecordTimeout = time.Second

// New returns a Router reading configuration from cfg and state from st.
func New(cfg ConfigSource, st Store, opts Options) *Router {
	r := &Router{config: cfg, store: st, clock: opts.Clock, rand: opts.Rand, log: opts.Logger, recordTimeout: opts.RecordTimeout}
	if r.recordTimeout <= 0 {
		r.recordTimeout = DefaultRecordTimeout
	}
	if r.clock == nil {
		r.clock = clock.System{}
	}
	if r.rand == nil {
		r.rand = SystemRand{}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.scratch.New = func() any { return &scratch{} }
	return r
}

// Config returns the configuration in force.
func (r *Router) Config() *config.Snapshot { return r.config.Load() }
