package routing

import (
	"net/http"
	"time"

	"github.com/switchyard-gw/switchyard/routing/failure"
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

// spent returns the stop of a request whose attempt budget (maxAttempts) is spent or whose
// deadline (totalMs) leaves no room for a meaningful attempt (behaviour §6.4), or nil. When
// the stop tells the client to come back later (429, 503), the Retry-After must be when what
// blocks the model reopens, not what the provider said (a capacity circuit may last longer
// than its Retry-After), so the candidates are surveyed for it.
func (x *decision) spent() *StopError {
	var e *StopError
	switch {
	case x.h.asked() >= x.maxAttempts:
		// behaviour §6.4 counts upstream attempts: incompatibilities the gateway found itself
		// do not spend the budget.
		e = x.h.FinalStop()
	case x.left < MinAttemptTime:
		e = deadlineStop(x.last)
	default:
		return nil
	}
	if e.comeBackLater() {
		x.plan()
		x.readStates()
		x.assess()
		x.retryWhenReopened(e)
	}
	return e
}

// comeBackLater reports whether e is the provider's own 429 or 503, which tells the client
// to retry later.
func (e *StopError) comeBackLater() bool {
	return e.Upstream && (e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable)
}

// retryWhenReopened sets e's Retry-After to when the first candidate can be used again, if
// every candidate is blocked and at least one only for a while.
func (x *decision) retryWhenReopened(e *StopError) {
	for i := range x.cands {
		if x.cands[i].block.usable() {
			return
		}
	}
	if ra, ok := x.soonestReopen(); ok {
		e.RetryAfter = ra
	}
}

// blocked ends a request for which no candidate is eligible. If an upstream was asked,
// the client hears what it said (behaviour §7.4), with a Retry-After for when what blocks the
// model reopens when its 429 or 503 tells the client to come back, if every candidate is
// blocked. Otherwise the blockers decide (behaviour §4.2, §7.5): every candidate quarantined
// or out of quota → 503 model_unavailable; only rate limits and capacity circuits → 429
// rate_limit_exceeded; any cooling circuit → 503 model_overloaded. Both carry the exact time
// until the first candidate is usable again as Retry-After.
func (x *decision) blocked() *StopError {
	if last := x.h.lastAsked(); last != nil {
		e := upstreamStop(last)
		if e.comeBackLater() {
			x.retryWhenReopened(e)
		}
		return e
	}
	if len(x.cands) == 0 {
		return x.unserved()
	}
	model := x.req.Model
	var cooling, limited, misconfigured int
	for i := range x.cands {
		c := &x.cands[i]
		switch {
		case c.block == blockedCooldown, c.block == blockedProbe && c.reopens():
			cooling++
		case c.block == blockedCapacity, c.block == blockedLimit:
			limited++
		case !c.block.usable():
			// Quarantined (its probe included: behaviour §5.6) or out of quota.
			misconfigured++
		}
	}
	retryAfter, _ := x.soonestReopen()
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

// unserved ends a request that planned no candidate at all: its skips, or the kill switches
// and drains, say why.
func (x *decision) unserved() *StopError {
	model := x.req.Model
	for _, k := range x.d.Skips {
		if k.Cause == SkipCapability {
			return &StopError{Status: http.StatusBadRequest, Code: "capability_unsupported", Kind: failure.KindInvalidRequest,
				Message: "No deployment of `" + model + "` supports this request: " + k.Why + "."}
		}
	}
	for _, k := range x.d.Skips {
		if k.Cause == SkipPolicy && k.Model == model {
			// The route role checks the requested model first; this is its backstop.
			return &StopError{Status: http.StatusForbidden, Code: "model_not_allowed", Kind: failure.KindAuth,
				Message: "This API key may not use the model `" + model + "`."}
		}
	}
	if x.disabled > 0 && x.drained == 0 {
		return &StopError{Status: http.StatusServiceUnavailable, Code: "model_unavailable", Message: "Every deployment of `" + model + "` is switched off."}
	}
	if x.drained > 0 {
		return &StopError{Status: http.StatusServiceUnavailable, Code: "model_unavailable", Message: "Every deployment of `" + model + "` is switched off or drained (weight 0)."}
	}
	return &StopError{Status: http.StatusServiceUnavailable, Code: "model_unavailable", Message: "No deployment of `" + model + "` can take the request."}
}

// soonestReopen is the one rule for when blocked deployments can be used again: the time
// until the first candidate blocked only for a while (see candidate.reopens) is usable, if
// any is.
func (x *decision) soonestReopen() (time.Duration, bool) {
	var soonest *candidate
	for i := range x.cands {
		c := &x.cands[i]
		if c.reopens() && c.untilAvailable > 0 && (soonest == nil || c.untilAvailable < soonest.untilAvailable) {
			soonest = c
		}
	}
	if soonest == nil {
		return 0, false
	}
	return max(soonest.reopensIn(x.now), 0), true
}
