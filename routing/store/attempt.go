package store

import "time"

// AttemptStart describes an upstream attempt that begins now.
type AttemptStart struct {
	DeploymentID string
	// AttemptID is unique per attempt; it is the in-flight entry's identity.
	AttemptID string
	Now       time.Time
	// Expires bounds the in-flight entry so a crashed process cannot leave the deployment
	// busy forever (behaviour §3.1). Callers use the attempt's own deadline plus a grace period.
	Expires time.Time
	// Reserved: Reserve already counted this attempt's request in its minute, so the start
	// only puts it in flight.
	Reserved bool
}

// Reservation asks for a share of one deployment's minute under its limits (behaviour §4.1:
// rpmLimit and tpmLimit are hard): one request and an estimate of its tokens.
type Reservation struct {
	DeploymentID string
	Now          time.Time
	// RPMLimit and TPMLimit are the deployment's limits; 0 is none.
	RPMLimit, TPMLimit int64
	// Tokens is the estimate of the attempt's total tokens. It counts in the minute's tokens
	// until the attempt's outcome replaces it with the real usage (AttemptFinish.Reserved).
	Tokens int64
}

// Effect is what an attempt's outcome does to the shared state. The routing core maps the
// failure taxonomy (behaviour §7.3) onto these.
type Effect uint8

const (
	// EffectNeutral only releases the attempt (and the half-open probe it owned): request
	// faults, the client's cancel, gateway errors and candidate incompatibility penalise
	// nobody (behaviour §7.3).
	EffectNeutral Effect = iota
	// EffectSuccess: health success, closes a probe or clears the failure count, updates the
	// latency and throughput EWMAs and the minute's tokens (behaviour §3.2–3.5, §5.2).
	EffectSuccess
	// EffectTransient: health failure and one circuit failure per request and deployment
	// (behaviour §3.5, §5.1, §5.3).
	EffectTransient
	// EffectThrottle: opens the failure domain's capacity circuit for
	// max(ThrottleCooldown, RetryAfter); no health penalty, no failure count (behaviour §5.7).
	// Like EffectNeutral and EffectQuota it is no verdict on a half-open probe, which it
	// releases.
	EffectThrottle
	// EffectQuota: an exhausted quota: the domain's capacity circuit opens for
	// ConfigurationCooldown (a configuration-like outage, behaviour §7.3).
	EffectQuota
	// EffectConfiguration: quarantine for ConfigurationCooldown (behaviour §5.6).
	EffectConfiguration
)

func (e Effect) String() string {
	switch e {
	case EffectSuccess:
		return "success"
	case EffectTransient:
		return "transient"
	case EffectThrottle:
		return "throttle"
	case EffectQuota:
		return "quota"
	case EffectConfiguration:
		return "configuration"
	default:
		return "neutral"
	}
}

// AttemptFinish describes the end of an attempt.
type AttemptFinish struct {
	DeploymentID string
	// Domain is the deployment's failure domain (see DomainOf).
	Domain    string
	AttemptID string
	// RequestID is the logical request: at most one failure per request and deployment is
	// counted (behaviour §5.3), and it identifies the half-open probe owner.
	RequestID string
	// Started is when the attempt started. A failure of an attempt that started before the
	// circuit's last transition changes nothing (behaviour §5.5). Zero means unknown: the failure
	// is then taken as if the attempt had started after it.
	Started  time.Time
	Now      time.Time
	Effect   Effect
	Settings CircuitSettings
	// Latency: from just before the upstream call until the upstream finished responding
	// (behaviour §3.3). Used on success.
	Latency          time.Duration
	CompletionTokens int64
	TotalTokens      int64
	// Reserved is the reservation the attempt's request was counted under (zero: none). Its
	// token estimate leaves the minute it was counted in, if that minute is still the
	// current one, whatever the outcome, when this finish ends the attempt's live in-flight
	// entry (so once per attempt); a success then adds TotalTokens as usual.
	Reserved ReservedTokens
	// RetryAfter is the provider's Retry-After for throttles.
	RetryAfter time.Duration
	// Jitter in [0,1) for an exponential reopen cooldown. Randomness stays with the caller so
	// stores are deterministic.
	Jitter float64
	// DedupeTTL bounds how long the store remembers that RequestID already counted a failure
	// here; callers pass the time left before the request's deadline.
	DedupeTTL time.Duration
}

// ReservedTokens is what a reservation counted in a minute's tokens.
type ReservedTokens struct {
	// At is the reservation's Reservation.Now: its minute holds the estimate.
	At     time.Time
	Tokens int64
}

// Metrics are one deployment's routing metrics (behaviour §3).
type Metrics struct {
	InFlight int64
	// RPM and TPM are the current minute's requests and tokens (behaviour §3.2).
	RPM int64
	TPM int64
	// LatencyEWMA in seconds (α = 0.2, behaviour §3.3); valid when HasLatency.
	LatencyEWMA float64
	HasLatency  bool
	// ThroughputEWMA in completion tokens per second (behaviour §3.4); valid when HasThroughput.
	ThroughputEWMA float64
	HasThroughput  bool
	// Successes and Failures over the rolling health window (behaviour §3.5).
	Successes int64
	Failures  int64
}

// HealthScore is successes / (successes + failures), or a neutral 0.5 when nothing was
// recorded in the window (behaviour §3.5).
func (m Metrics) HealthScore() float64 {
	total := m.Successes + m.Failures
	if total == 0 {
		return 0.5
	}
	return float64(m.Successes) / float64(total)
}

// HasHealth reports whether the window holds any recorded attempt.
func (m Metrics) HasHealth() bool { return m.Successes+m.Failures > 0 }

// EWMAAlpha is the smoothing factor of the latency and throughput averages (behaviour §3.3–3.4).
const EWMAAlpha = 0.2

// HealthWindow is the rolling window of the health score (behaviour §3.5). Stores keep it as
// HealthBuckets one-minute buckets, so the window slides by whole minutes.
const HealthWindow = 10 * time.Minute

// HealthBuckets is the number of one-minute health buckets: bucket minute m lives in slot
// HealthSlot(m), and a read at minute counts the buckets InHealthWindow. redisstore's Lua
// (lua/finish.lua record_health, which gets the count from Go) mirrors this layout; the
// conformance suite holds it to it.
const HealthBuckets = int(HealthWindow / time.Minute)

// HealthSlot is the slot of the bucket of minute m (Unix minutes): a newer minute reuses the
// slot of the one HealthBuckets minutes older.
func HealthSlot(m int64) int { return int(m % int64(HealthBuckets)) }

// InHealthWindow reports whether the bucket of minute bucket counts in a read at minute.
func InHealthWindow(bucket, minute int64) bool {
	return bucket > minute-int64(HealthBuckets) && bucket <= minute
}

// HealthBucket is one minute of the health window.
type HealthBucket struct {
	Minute              int64
	Successes, Failures int64
}

// Record adds an outcome of minute m to b, the bucket in m's slot. A newer minute resets the
// bucket; a minute older than the one it holds lies outside every window that still reads the
// bucket (a replica whose clock lags) and is dropped.
func (b *HealthBucket) Record(m int64, success bool) {
	switch {
	case m < b.Minute:
		return
	case m > b.Minute:
		*b = HealthBucket{Minute: m}
	}
	if success {
		b.Successes++
	} else {
		b.Failures++
	}
}

// MinuteOf is the per-minute bucket index of t (Unix minutes), shared by every store so
// replicas agree on bucket boundaries.
func MinuteOf(t time.Time) int64 { return t.Unix() / 60 }

// EWMA folds sample x into an average; the first sample is taken as is.
func EWMA(prev float64, has bool, x float64) float64 {
	if !has {
		return x
	}
	return EWMAAlpha*x + (1-EWMAAlpha)*prev
}

// Throughput is completion tokens per second for a finished attempt, or false when it cannot
// be computed (no tokens reported or no duration).
func Throughput(completionTokens int64, latency time.Duration) (float64, bool) {
	if completionTokens <= 0 || latency <= 0 {
		return 0, false
	}
	return float64(completionTokens) / latency.Seconds(), true
}

// DefaultDedupeTTL is how long a store remembers a request's counted failure when the caller
// passes no DedupeTTL: the longest default total deadline (behaviour §6.2).
const DefaultDedupeTTL = time.Hour
