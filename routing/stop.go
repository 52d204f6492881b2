package routing

import (
	"net/http"
	"time"

	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// upstreamStop ends the request with what the provider said last (behaviour §7.4): its status and
// sanitised public message. Faults of our own configuration are not the client's business:
// a deployment the provider rejects as misconfigured, or whose quota is gone, reads as
// 503 model_unavailable (behaviour §7.5).
func upstreamStop(last *Attempt) *StopError {
	if last == nil {
		return &StopError{Status: http.StatusServiceUnavailable, Code: "model_unavailable", Message: "No deployment could take the request."}
	}
	switch {
	case last.Class == failure.ClassConfiguration, last.Class == failure.ClassThrottle && last.Quota:
		return &StopError{Status: http.StatusServiceUnavailable, Code: "model_unavailable", Kind: last.Kind,
			Message: "The model is temporarily unavailable."}
	case last.Class == failure.ClassGateway:
		status := last.Status
		if status == 0 {
			status = http.StatusInternalServerError
		}
		return &StopError{Status: status, Code: "gateway_error", Kind: last.Kind, Message: "The gateway could not complete the request."}
	case last.Class == failure.ClassNone:
		return &StopError{Status: http.StatusInternalServerError, Code: "gateway_error", Message: "Nothing left to decide: the last attempt succeeded."}
	}
	e := &StopError{Status: last.Status, Code: last.Code, Type: last.Type, Message: last.Message, Kind: last.Kind, Upstream: true}
	if e.Status == 0 {
		e.Status = http.StatusBadGateway
	}
	if e.Message == "" {
		e.Message = genericMessage(last.Kind)
	}
	if (e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable) && last.RetryAfterHeader {
		// Only the provider's own Retry-After: a reset hint (x-ratelimit-reset-requests:
		// 6ms on a 503) says when a rate window refills, not when to come back, and an SDK
		// would retry at once (docs/routing.md, "Retry-After on a final error").
		e.RetryAfter = min(last.RetryAfter, RetryAfterLimit)
	}
	return e
}

// FinalStop is what a request that can make no further attempt ends with: what the last
// upstream said (behaviour §7.4), as Decide answers when the budget is spent. Callers that bound
// attempts by limits of their own (the ext_proc route role's internal-redirect budget) use it.
func (h *History) FinalStop() *StopError { return upstreamStop(h.lastAsked()) }

// genericMessage words a failure for which the upstream sent no message (no response at all).
func genericMessage(k failure.Kind) string {
	switch k {
	case failure.KindConnect:
		return "The upstream provider could not be reached."
	case failure.KindTimeout:
		return "The upstream provider did not respond in time."
	case failure.KindPartialStream:
		return "The upstream stream ended before it was complete."
	default:
		return "The upstream provider failed to answer the request."
	}
}

// deadlineStop ends a request whose deadline leaves no room for another attempt (behaviour §6.4).
func deadlineStop(last *Attempt) *StopError {
	if last != nil {
		return upstreamStop(last)
	}
	return &StopError{Status: http.StatusGatewayTimeout, Code: "timeout", Kind: failure.KindTimeout,
		Message: "The request's deadline passed before an upstream could be asked."}
}

// blockedStop ends a request for which no candidate is eligible. If an upstream was asked,
// the client hears what it said (behaviour §7.4). Otherwise the blockers decide (behaviour §4.2, §7.5):
// every candidate quarantined or out of quota → 503 model_unavailable; only rate limits and
// capacity circuits → 429 rate_limit_exceeded; any cooling circuit → 503 model_overloaded.
// Both carry the exact time until the first candidate is usable again as Retry-After.
// When an upstream was asked and its 429 or 503 tells the client to come back, the
// Retry-After is when what blocks the model reopens, if every candidate is blocked.
func blockedStop(h *History, s *scratch, d *Decision, model string, now time.Time) *StopError {
	if last := h.lastAsked(); last != nil {
		e := upstreamStop(last)
		if ra, ok := soonestReopen(s, now); ok && e.Upstream && (e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable) {
			e.RetryAfter = ra
		}
		return e
	}
	if len(s.cands) == 0 {
		for _, k := range d.Skips {
			if k.Cause == SkipCapability {
				return &StopError{Status: http.StatusBadRequest, Code: "capability_unsupported", Kind: failure.KindInvalidRequest,
					Message: "No deployment of `" + model + "` supports this request: " + k.Why + "."}
			}
		}
		for _, k := range d.Skips {
			if k.Cause == SkipPolicy && k.Model == model {
				// The route role checks the requested model first; this is its backstop.
				return &StopError{Status: http.StatusForbidden, Code: "model_not_allowed", Kind: failure.KindAuth,
					Message: "This API key may not use the model `" + model + "`."}
			}
		}
		if s.disabled > 0 && s.drained == 0 {
			return &StopError{Status: http.StatusServiceUnavailable, Code: "model_unavailable", Message: "Every deployment of `" + model + "` is switched off."}
		}
		if s.drained > 0 {
			return &StopError{Status: http.StatusServiceUnavailable, Code: "model_unavailable", Message: "Every deployment of `" + model + "` is switched off or drained (weight 0)."}
		}
		return &StopError{Status: http.StatusServiceUnavailable, Code: "model_unavailable", Message: "No deployment of `" + model + "` can take the request."}
	}
	var cooling, limited, misconfigured int
	var soonest int64
	for i := range s.cands {
		c := &s.cands[i]
		switch c.block {
		case blockedProbe:
			// A quarantine's probe stays a quarantine for everyone else (behaviour §5.6).
			if c.state.Circuit.Cause == store.CauseConfiguration {
				misconfigured++
				continue
			}
			cooling++
		case blockedCooldown:
			cooling++
		case blockedCapacity, blockedLimit:
			limited++
		case blockedQuarantine, blockedQuota:
			misconfigured++
			continue // not expected back soon enough to advertise
		default:
			continue
		}
		if c.untilAvailable > 0 && (soonest == 0 || c.untilAvailable < soonest) {
			soonest = c.untilAvailable
		}
	}
	retryAfter := time.Duration(0)
	if soonest > 0 {
		retryAfter = max(time.Unix(0, soonest).Sub(now), 0)
	}
	switch {
	case cooling == 0 && limited == 0 && misconfigured > 0:
		return &StopError{Status: http.StatusServiceUnavailable, Code: "model_unavailable", Message: "The model `" + model + "` is unavailable."}
	case cooling == 0 && limited > 0:
		return &StopError{Status: http.StatusTooManyRequests, Code: "rate_limit_exceeded", Kind: failure.KindRateLimit, RetryAfter: retryAfter,
			Message: "Rate limit reached for `" + model + "`; retry after the interval in Retry-After."}
	case cooling > 0:
		return &StopError{Status: http.StatusServiceUnavailable, Code: "model_overloaded", Kind: failure.KindOverloaded, RetryAfter: retryAfter,
			Message: "Every deployment of `" + model + "` is cooling down; retry after the interval in Retry-After."}
	}
	// Candidates exist but none was usable for another reason (e.g. the deadline cannot fit
	// a reuse wait).
	return &StopError{Status: http.StatusServiceUnavailable, Code: "model_unavailable", Message: "No deployment of `" + model + "` can take the request now."}
}

// soonestReopen is the exact time until the first candidate can be used again, when every
// candidate is blocked and at least one only for a while (not quarantined nor out of quota).
func soonestReopen(s *scratch, now time.Time) (time.Duration, bool) {
	var soonest int64
	for i := range s.cands {
		c := &s.cands[i]
		switch c.block {
		case eligible, needsProbe:
			return 0, false
		case blockedQuarantine, blockedQuota:
			continue
		case blockedProbe:
			if c.state.Circuit.Cause == store.CauseConfiguration {
				continue
			}
		}
		if c.untilAvailable > 0 && (soonest == 0 || c.untilAvailable < soonest) {
			soonest = c.untilAvailable
		}
	}
	if soonest == 0 {
		return 0, false
	}
	return max(time.Unix(0, soonest).Sub(now), 0), true
}
