package config

import (
	"time"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
)

// Defaults of behaviour §5 and §7.
const (
	DefaultStrategy                     = StrategySimpleShuffle
	DefaultAllowedFails                 = 3
	DefaultCooldownSeconds              = 5
	DefaultRetryAfterSeconds            = 0
	DefaultFailureWindowSeconds         = 60
	DefaultMaxCooldownSeconds           = 300
	DefaultHalfOpenProbeSeconds         = 30
	DefaultConfigurationCooldownSeconds = 300
	DefaultThrottleCooldownSeconds      = 5
	DefaultWhenAllOpen                  = "reject"
	DefaultIdempotencyKeyTTLSeconds     = 86400
)

// DefaultPolicy returns the behaviour §6.2 policy of one matrix cell. The defaults match the
// official OpenAI/Anthropic SDKs' 600 s read timeout.
func DefaultPolicy(o Operation, m Mode) Policy {
	const s = time.Second
	switch o {
	case OpText:
		if m == ModeStream {
			return Policy{Response: 600 * s, Idle: 600 * s, Total: 3600 * s, MaxAttempts: 3}
		}
		return Policy{Response: 600 * s, Total: 1800 * s, MaxAttempts: 3}
	case OpImages:
		if m == ModeStream {
			return Policy{Response: 600 * s, Idle: 300 * s, Total: 1800 * s, MaxAttempts: 2}
		}
		return Policy{Response: 600 * s, Total: 1800 * s, MaxAttempts: 2}
	case OpAudio:
		if m == ModeStream {
			return Policy{Response: 600 * s, Idle: 300 * s, Total: 1800 * s, MaxAttempts: 2}
		}
		return Policy{Response: 900 * s, Total: 1800 * s, MaxAttempts: 2}
	case OpEmbeddings, OpRerank:
		return Policy{Response: 120 * s, Total: 300 * s, MaxAttempts: 3}
	case OpVideo:
		return Policy{Response: 120 * s, Total: 300 * s, MaxAttempts: 2}
	default: // OpVideoDownload
		return Policy{Response: 120 * s, Idle: 120 * s, Total: 900 * s, MaxAttempts: 2}
	}
}

// DefaultExecutionPolicies is the full behaviour §6.2 matrix in its JSON form.
func DefaultExecutionPolicies() map[string]*configv1.OperationPolicy {
	out := make(map[string]*configv1.OperationPolicy)
	for _, o := range Operations() {
		op := &configv1.OperationPolicy{}
		if o.HasMode(ModeJSON) {
			op.Json = DefaultPolicy(o, ModeJSON).Proto()
		}
		if o.HasMode(ModeStream) {
			op.Stream = DefaultPolicy(o, ModeStream).Proto()
		}
		out[o.String()] = op
	}
	return out
}

// EffectiveSettings returns rs with every unset field filled with its default: what
// GET /admin/router-settings shows (behaviour §11.1).
func EffectiveSettings(rs *configv1.RouterSettings) *configv1.RouterSettings {
	out := &configv1.RouterSettings{}
	if rs != nil {
		out = proto.CloneOf(rs)
	}
	setDefault(&out.RoutingStrategy, DefaultStrategy.String())
	setDefault(&out.AllowedFails, DefaultAllowedFails)
	setDefault(&out.CooldownSeconds, DefaultCooldownSeconds)
	setDefault(&out.RetryAfterSeconds, DefaultRetryAfterSeconds)
	setDefault(&out.FailureWindowSeconds, DefaultFailureWindowSeconds)
	setDefault(&out.MaxCooldownSeconds, DefaultMaxCooldownSeconds)
	setDefault(&out.HalfOpenProbeSeconds, DefaultHalfOpenProbeSeconds)
	setDefault(&out.ConfigurationCooldownSeconds, DefaultConfigurationCooldownSeconds)
	setDefault(&out.ThrottleCooldownSeconds, DefaultThrottleCooldownSeconds)
	setDefault(&out.WhenAllOpen, DefaultWhenAllOpen)
	setDefault(&out.IdempotencyKeyTtlSeconds, DefaultIdempotencyKeyTTLSeconds)
	if len(out.ExecutionPolicies) == 0 {
		out.ExecutionPolicies = DefaultExecutionPolicies()
	}
	return out
}

func setDefault[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}
