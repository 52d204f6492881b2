package config

import (
	"time"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
)

// Policy is one execution policy in force (behaviour §6.1).
type Policy struct {
	// Response: JSON — until the full upstream response arrived; stream — until the upstream
	// answered with headers.
	Response time.Duration
	// Idle: stream only — longest silence between two upstream bytes; 0 disables it.
	Idle time.Duration
	// Total: the whole request with all attempts, retries and fallbacks.
	Total time.Duration
	// MaxAttempts: upstream attempts per request, fallbacks included.
	MaxAttempts int
}

// Proto is the policy in its JSON schema form.
func (p Policy) Proto() *configv1.ExecutionPolicy {
	ep := &configv1.ExecutionPolicy{
		ResponseMs:  proto.Uint64(uint64(p.Response.Milliseconds())),
		TotalMs:     proto.Uint64(uint64(p.Total.Milliseconds())),
		MaxAttempts: proto.Uint32(uint32(p.MaxAttempts)),
	}
	if p.Idle > 0 {
		ep.IdleMs = proto.Uint64(uint64(p.Idle.Milliseconds()))
	}
	return ep
}

func policyFromProto(ep *configv1.ExecutionPolicy) Policy {
	return Policy{
		Response:    ms(ep.GetResponseMs()),
		Idle:        ms(ep.GetIdleMs()),
		Total:       ms(ep.GetTotalMs()),
		MaxAttempts: int(ep.GetMaxAttempts()),
	}
}

// Override is a deployment's lowering of a policy (behaviour §6.3): zero fields inherit, and
// MaxAttempts is the most attempts on that deployment within one request.
type Override Policy

// Apply returns p lowered by o. Overrides only lower (validation guarantees it; Apply takes
// the minimum anyway, so a stale override can never raise a global value).
func (o Override) Apply(p Policy) Policy {
	p.Response = lower(p.Response, o.Response)
	p.Idle = lower(p.Idle, o.Idle)
	p.Total = lower(p.Total, o.Total)
	return p
}

// lower is a global duration lowered by an override; zero means unset (an override) or no
// limit (a global idleMs).
func lower(global, override time.Duration) time.Duration {
	if override > 0 && (global == 0 || override < global) {
		return override
	}
	return global
}

func ms(v uint64) time.Duration { return time.Duration(v) * time.Millisecond }
