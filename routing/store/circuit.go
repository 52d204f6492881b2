package store

import (
	"math"
	"time"
)

// CircuitSettings are the behaviour §5 settings in force for a transition. The core passes them
// with every call so a settings change applies to the next transition on every replica.
type CircuitSettings struct {
	AllowedFails          uint32
	Cooldown              time.Duration // 0 disables automatic cooldown circuits (behaviour §5.1)
	FailureWindow         time.Duration
	MaxCooldown           time.Duration
	HalfOpenProbe         time.Duration
	ConfigurationCooldown time.Duration
	ThrottleCooldown      time.Duration
}

// OpenCause says why a circuit is open.
type OpenCause uint8

const (
	CauseNone OpenCause = iota
	// CauseTransient: too many transient failures (behaviour §5.1) or a failed probe (behaviour §5.4).
	CauseTransient
	// CauseConfiguration: quarantined after a configuration failure (behaviour §5.6).
	CauseConfiguration
)

func (c OpenCause) String() string {
	switch c {
	case CauseTransient:
		return "transient"
	case CauseConfiguration:
		return "configuration"
	default:
		return "none"
	}
}

// Circuit is the stored circuit record of one deployment. Half-open is not stored: an open
// circuit whose OpenUntil has passed is half-open (behaviour §5.4), so no timer or background job
// is needed to move it there.
type Circuit struct {
	Open bool
	// Cause is what opened the circuit. A failed probe keeps it, so a quarantine stays a
	// quarantine (and keeps its cooldown base) until a probe succeeds.
	Cause       OpenCause
	Failures    uint32    // transient failures counted in the current window
	WindowStart time.Time // start of the fixed failure window (zero: no window yet)
	OpenedAt    time.Time // the last opening: open, reopen or quarantine
	OpenUntil   time.Time
	Reopens     uint32 // failed probes since the circuit first opened (exponential cooldown)
	ProbeOwner  string // request owning the half-open probe
	ProbeUntil  time.Time
	// ClosedAt is when a probe last closed the circuit (zero: never). With OpenedAt and
	// OpenUntil it dates the last transition (see LastTransition).
	ClosedAt time.Time
}

// CircuitState is the state reported to users (behaviour §5.8) plus the probe detail the core
// needs.
type CircuitState uint8

const (
	// StateAvailable: closed.
	StateAvailable CircuitState = iota
	// StateCooldown: open, cooldown not over.
	StateCooldown
	// StateHalfOpen: cooldown over, probe free (or its owner's TTL expired).
	StateHalfOpen
	// StateProbing: cooldown over, another request owns the live probe; not eligible.
	StateProbing
)

// State derives the circuit's state at now.
func (c Circuit) State(now time.Time) CircuitState {
	switch {
	case !c.Open:
		return StateAvailable
	case now.Before(c.OpenUntil):
		return StateCooldown
	case c.ProbeOwner != "" && now.Before(c.ProbeUntil):
		return StateProbing
	default:
		return StateHalfOpen
	}
}

// LastTransition is when the circuit last changed state as of now: the close, the opening
// (open, reopen, quarantine) or the end of the cooldown (half-open, which is derived and never
// written). An outcome of an attempt that started before it says nothing about the state the
// circuit is in now (behaviour §5.5).
func (c Circuit) LastTransition(now time.Time) time.Time {
	switch {
	case !c.Open:
		return c.ClosedAt
	case now.Before(c.OpenUntil):
		return c.OpenedAt
	default:
		return c.OpenUntil
	}
}

// StartedBefore reports whether an attempt that started at started began before the circuit's
// last transition as of now. A zero start is unknown and never counts as before.
func (c Circuit) StartedBefore(started, now time.Time) bool {
	return !started.IsZero() && started.Before(c.LastTransition(now))
}

// RetryAfter is how long until the circuit may admit a request again: the rest of the cooldown,
// or of a live probe's ownership. Zero when it admits one now.
func (c Circuit) RetryAfter(now time.Time) time.Duration {
	switch c.State(now) {
	case StateCooldown:
		return c.OpenUntil.Sub(now)
	case StateProbing:
		return c.ProbeUntil.Sub(now)
	default:
		return 0
	}
}

// Capacity is the capacity circuit of a failure domain (behaviour §4.3, §5.7).
type Capacity struct {
	Until time.Time
	// Quota marks an exhausted quota (e.g. OpenAI insufficient_quota): a configuration-like
	// outage of the domain rather than a throttle (behaviour §7.3).
	Quota bool
}

// Limited reports whether the domain is rate limited at now.
func (c Capacity) Limited(now time.Time) bool { return now.Before(c.Until) }

// Transition reports what an attempt's outcome did to the stored state, for logs, metrics
// and tests.
type Transition struct {
	// Counted: a transient failure was added to the window (false for a duplicate of the
	// same request and deployment, behaviour §5.3, or a late failure of an open circuit, behaviour §5.5).
	Counted bool
	// Opened: the circuit went from closed to open.
	Opened bool
	// Reopened: a failed probe reopened the circuit with a longer cooldown.
	Reopened bool
	// Closed: a successful probe closed the circuit.
	Closed bool
	// Cleared: a success while closed reset the failure count (behaviour §5.2).
	Cleared bool
	// Quarantined: a configuration failure opened (or extended) the circuit (behaviour §5.6).
	Quarantined bool
	// CapacityOpened: the failure domain's capacity circuit was opened or extended.
	CapacityOpened bool
	// ProbeReleased: the attempt owned the half-open probe and ended without a verdict, so
	// the probe is free again.
	ProbeReleased bool
	// Circuit is the record after the transition.
	Circuit Circuit
	// Capacity is the domain's capacity circuit after the transition (set when touched).
	Capacity Capacity
}

// Failure is one transient failure of an attempt, as ApplyFailure applies it.
type Failure struct {
	// RequestID is the logical request whose attempt failed: the half-open probe's owner is
	// one.
	RequestID string
	// FirstForRequest says whether this is the first failure of RequestID on this deployment
	// (the dedupe, behaviour §5.3, is kept by the store).
	FirstForRequest bool
	// Started is when the attempt started (zero: unknown, see AttemptFinish.Started); Now is
	// when it failed.
	Started, Now time.Time
	// Jitter in [0,1) scales the exponential cooldown of a failed probe by up to 25%.
	Jitter float64
}

// ApplyFailure applies the transient failure f to c (behaviour §5.1, §5.3–5.5).
//
// This function is the reference semantics: memstore runs it under a lock, and redisstore's
// Lua script implements the same steps; the conformance suite holds both to it.
func ApplyFailure(c Circuit, f Failure, s CircuitSettings) (Circuit, Transition) {
	var t Transition
	if c.StartedBefore(f.Started, f.Now) {
		// A late failure (behaviour §5.5): the attempt began before the circuit last changed
		// state, e.g. before a probe closed it, so it says nothing about the state now.
		t.Circuit = c
		return c, t
	}
	switch c.State(f.Now) {
	case StateCooldown, StateProbing:
		// Open: late failures of requests that were already in flight cannot extend it
		// (behaviour §5.5). A probe owner's failure while its probe is live is handled below.
		if c.State(f.Now) == StateProbing && c.ProbeOwner == f.RequestID {
			return reopen(c, f.Now, s, f.Jitter)
		}
		t.Circuit = c
		return c, t
	case StateHalfOpen:
		// Only the probe's owner decides the half-open outcome; any other failure comes from
		// a request that started before the circuit opened.
		if c.ProbeOwner == f.RequestID {
			return reopen(c, f.Now, s, f.Jitter)
		}
		t.Circuit = c
		return c, t
	}
	if !f.FirstForRequest {
		t.Circuit = c
		return c, t
	}
	if c.WindowStart.IsZero() || !f.Now.Before(c.WindowStart.Add(s.FailureWindow)) {
		// Fixed window (behaviour §5.1): a new window starts with the first failure after the
		// previous one ended.
		c.WindowStart = f.Now
		c.Failures = 0
	}
	c.Failures++
	t.Counted = true
	if c.Failures > s.AllowedFails && s.Cooldown > 0 {
		c.Open = true
		c.Cause = CauseTransient
		c.OpenedAt = f.Now
		c.OpenUntil = f.Now.Add(s.Cooldown)
		c.Reopens = 0
		c.ProbeOwner = ""
		c.ProbeUntil = time.Time{}
		c.ClosedAt = time.Time{}
		t.Opened = true
	}
	t.Circuit = c
	return c, t
}

// reopen handles a failed probe: the circuit opens again with an exponential cooldown plus
// up to 25% jitter, capped at MaxCooldown (behaviour §5.4). The cause stays what first opened the
// circuit, so a quarantine keeps its base (configurationCooldownSeconds) on every reopen and
// stays a quarantine for the stop code (behaviour §7.5) until a probe succeeds.
func reopen(c Circuit, now time.Time, s CircuitSettings, jitter float64) (Circuit, Transition) {
	c.Reopens++
	c.OpenedAt = now
	c.OpenUntil = now.Add(ReopenCooldown(s, c.Cause, c.Reopens, jitter))
	c.ProbeOwner = ""
	c.ProbeUntil = time.Time{}
	return c, Transition{Reopened: true, Circuit: c}
}

// ReopenCooldown is the cooldown after the n-th consecutive failed probe:
// base × 2^n × (1 + jitter/4), capped at MaxCooldown. The base is the cooldown that opened the
// circuit (cooldownSeconds, or configurationCooldownSeconds for a quarantine).
func ReopenCooldown(s CircuitSettings, cause OpenCause, n uint32, jitter float64) time.Duration {
	base := s.Cooldown
	if cause == CauseConfiguration {
		base = s.ConfigurationCooldown
	}
	if base <= 0 {
		base = time.Second
	}
	d := float64(base) * math.Pow(2, float64(min(n, 30))) * (1 + ClampJitter(jitter)/4)
	if s.MaxCooldown > 0 && d > float64(s.MaxCooldown) {
		return s.MaxCooldown
	}
	return time.Duration(d)
}

// ClampJitter keeps a caller's jitter in [0,1]; NaN and negatives read as 0. Every store
// passes jitter through it (redisstore before it reaches Lua).
func ClampJitter(j float64) float64 {
	if j < 0 || math.IsNaN(j) {
		return 0
	}
	return min(j, 1)
}

// ApplySuccess applies a successful attempt of requestID (behaviour §5.2, §5.4).
func ApplySuccess(c Circuit, requestID string, now time.Time) (Circuit, Transition) {
	var t Transition
	switch c.State(now) {
	case StateAvailable:
		if c.Failures > 0 || !c.WindowStart.IsZero() {
			t.Cleared = true
		}
		c.Failures = 0
		c.WindowStart = time.Time{}
	case StateHalfOpen, StateProbing:
		if c.ProbeOwner == requestID {
			c = Circuit{ClosedAt: now}
			t.Closed = true
		}
		// Successes of other requests (started before the circuit opened) prove nothing
		// about recovery: only the probe closes the circuit.
	}
	t.Circuit = c
	return c, t
}

// ApplyConfigurationFailure quarantines the deployment at once for ConfigurationCooldown
// (behaviour §5.6), unless the attempt started before the circuit's last transition (behaviour §5.5:
// a late 401 must not re-quarantine a deployment a probe has just proven). It never shortens
// a longer open period already in place.
func ApplyConfigurationFailure(c Circuit, started, now time.Time, s CircuitSettings) (Circuit, Transition) {
	until := now.Add(s.ConfigurationCooldown)
	if s.ConfigurationCooldown <= 0 || c.StartedBefore(started, now) {
		return c, Transition{Circuit: c}
	}
	if c.State(now) == StateCooldown && c.OpenUntil.After(until) {
		return c, Transition{Circuit: c}
	}
	c.Open = true
	c.Cause = CauseConfiguration
	c.OpenedAt = now
	c.OpenUntil = until
	c.Failures = 0
	c.WindowStart = time.Time{}
	c.ProbeOwner = ""
	c.ProbeUntil = time.Time{}
	c.ClosedAt = time.Time{}
	return c, Transition{Quarantined: true, Circuit: c}
}

// ReleaseProbe frees the half-open probe of requestID when its attempt ended without a
// verdict on recovery (a request fault, the client's cancel, a gateway error, a throttle):
// the next request may probe at once instead of waiting out halfOpenProbeSeconds (behaviour §5.4).
// It reports whether the probe was released.
func ReleaseProbe(c Circuit, requestID string, now time.Time) (Circuit, bool) {
	if c.State(now) != StateProbing || c.ProbeOwner != requestID {
		return c, false
	}
	c.ProbeOwner = ""
	c.ProbeUntil = time.Time{}
	return c, true
}

// CapacityCooldown is how long a throttle or an exhausted quota closes the failure domain
// (behaviour §5.7, §7.3): max(throttleCooldownSeconds, Retry-After) for a throttle,
// configurationCooldownSeconds for a quota. Zero for any other effect.
func CapacityCooldown(e Effect, s CircuitSettings, retryAfter time.Duration) time.Duration {
	switch e {
	case EffectThrottle:
		return max(s.ThrottleCooldown, retryAfter)
	case EffectQuota:
		return s.ConfigurationCooldown
	default:
		return 0
	}
}

// ApplyCapacity opens or extends a failure domain's capacity circuit until now+d (behaviour §5.7);
// it never shortens it. quota marks a configuration-like outage (behaviour §7.3).
func ApplyCapacity(c Capacity, now time.Time, d time.Duration, quota bool) (Capacity, bool) {
	until := now.Add(d)
	if d <= 0 || !until.After(c.Until) {
		if quota && c.Limited(now) && !c.Quota {
			c.Quota = true
			return c, true
		}
		return c, false
	}
	c.Until = until
	c.Quota = quota || (c.Quota && c.Limited(now))
	return c, true
}

// AcquireProbe applies a probe request to c: it reports whether requestID owns the probe after
// the call (behaviour §5.4).
func AcquireProbe(c Circuit, requestID string, now time.Time, ttl time.Duration) (Circuit, bool) {
	switch c.State(now) {
	case StateHalfOpen:
		c.ProbeOwner = requestID
		c.ProbeUntil = now.Add(ttl)
		return c, true
	case StateProbing:
		return c, c.ProbeOwner == requestID
	default:
		return c, false
	}
}
