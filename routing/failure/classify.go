package failure

import (
	"net/http"
	"time"
)

// quotaRetryAfter: a 429 asking for a wait this long is a quota, not a rate limit. Azure's
// daily or quota limit says "Please retry after 86400 seconds" (docs/wire-formats.md §4.3), and
// openai-python (≥ v2.52.0) gives up on any Retry-After above 120 s (§5).
const quotaRetryAfter = time.Hour

// Classify decides what an upstream attempt's outcome means for routing (behaviour §7.3). It never
// fails: an unknown status or an unreadable body gets the default of its status class, and
// Message is always sanitised (Sanitize, and o.Secrets redacted literally) and, for a
// failure, never empty.
//
// Section numbers (§) in this package refer to docs/wire-formats.md, unless they say behaviour §.
//
// The provider dialects share one reader (see errorBody): their codes and types do not
// collide, an OpenAI-compatible server may answer in any of them, and Azure is OpenAI's shape
// with string codes. The Provider only chooses the status of an in-band overload.
func Classify(o Outcome, now time.Time) Classification {
	if o.Transport != TransportNone {
		return classifyTransport(o)
	}
	if o.Succeeded() {
		return Classification{Status: o.Status}
	}
	e := parseErrorBody(o.Body)
	status := o.Status
	if o.InBand {
		// behaviour §8.5: classified like the equivalent HTTP error, by error type/code.
		status = inBandStatus(&e, o.Provider, o.Status)
	}
	c := classifyStatus(status, &e, o.Header, now)
	c.Type, c.Code, c.Param = o.Secrets.Redact(e.typ), o.Secrets.Redact(e.code), o.Secrets.Redact(e.param)
	c.Message = o.Secrets.Sanitize(e.message)
	if c.Message == "" {
		c.Message = fallbackMessage(c.Status, o.InBand)
	}
	return c
}

// classifyStatus is the verdict for an HTTP error status (or an in-band error's equivalent),
// refined by the body.
func classifyStatus(st int, e *errorBody, h http.Header, now time.Time) Classification {
	c := Classification{Status: st}
	switch {
	case st < 400 || st > 599:
		// 1xx/3xx (an unfollowed redirect), or no status at all: the upstream did not speak
		// the protocol. Transient, so that a persistent fault opens the circuit.
		c.Class, c.Kind, c.Status = ClassTransient, KindUnknown, http.StatusBadGateway
	case st < 500 && (st == http.StatusPaymentRequired || e.quota()):
		// An exhausted quota or spend limit, whatever 4xx carries it (Anthropic: 402
		// billing_error, 400 "credit balance is too low"; OpenRouter: 402 for no credits).
		c.Class, c.Kind, c.Quota = ClassThrottle, KindRateLimit, true
	case st == http.StatusTooManyRequests:
		c.Class, c.Kind = ClassThrottle, KindRateLimit
	case st == http.StatusUnauthorized, st == http.StatusForbidden:
		// Bad key, missing scope, permission_error, unsupported region (§1.4, §3.4, §4.3).
		c.Class, c.Kind = ClassConfiguration, KindAuth
	case st == http.StatusNotFound:
		// The kind is invalid_request, as OpenAI's own type for model_not_found says: nothing
		// is wrong with the credentials. The class carries the routing effect.
		c.Class, c.Kind = ClassRequest, KindInvalidRequest
		if e.missingModel() {
			c.Class = ClassConfiguration
		}
	case st == http.StatusRequestTimeout:
		c.Class, c.Kind = ClassTransient, KindTimeout // the SDKs retry 408 (§5)
	case st == http.StatusConflict:
		c.Class, c.Kind = ClassTransient, KindUnknown // the SDKs retry 409 (§5)
	case st < 500:
		// 400, 413, 422 and any other 4xx: the request itself.
		c.Class, c.Kind = ClassRequest, requestKind(e)
		if c.Kind == KindInvalidRequest && e.rateLimited() {
			// OpenAI's "Request too large for <model> ... on tokens per min" and "Rate limit
			// reached" are rate limits whatever their status (LiteLLM, docs/wire-formats.md §5).
			c.Class, c.Kind = ClassThrottle, KindRateLimit
		}
	case st == http.StatusGatewayTimeout:
		c.Class, c.Kind = ClassTransient, KindTimeout
	case st == http.StatusServiceUnavailable, st == 529, e.overloaded():
		// 529 is Anthropic's overloaded_error (§3.4); 503 is OpenAI's server_is_overloaded /
		// slow_down (§1.4) and generally "try later".
		c.Class, c.Kind = ClassTransient, KindOverloaded
	default:
		c.Class, c.Kind = ClassTransient, KindServerError
	}
	// x-should-retry overrides the status for the SDKs (§5). "true" on a Request-class 4xx:
	// the provider says it is worth another attempt; the kind still says what it reported
	// (a context_overflow the provider wants retried stays one). "false" on a 5xx or 429 is
	// not honoured: it tells a client not to repeat the call to the same upstream, while
	// failover moves to another deployment, and the failure must still count toward this
	// one's circuit.
	if c.Class == ClassRequest && retryRequested(h) {
		c.Class = ClassTransient
	}
	if c.Class == ClassThrottle || c.Class == ClassTransient {
		c.RetryAfter, c.RetryAfterHeader = retryAfter(h, e.message, now)
		if c.Class == ClassThrottle && !c.Quota &&
			(c.RetryAfter >= quotaRetryAfter || messageRetryAfter(e.message) >= quotaRetryAfter) {
			// The message is checked on its own too: Azure's text can name the daily limit
			// while a header names a shorter wait.
			c.Quota = true
		}
	}
	return c
}

// requestKind refines a Request-class 4xx. Codes decide before text, so that an explicit
// content_filter is a policy refusal even if its message mentions the context.
func requestKind(e *errorBody) Kind {
	switch e.code {
	case "context_length_exceeded":
		return KindContextOverflow
	case "content_filter", "content_policy_violation", "invalid_prompt", "image_content_policy_violation":
		return KindPolicy
	}
	switch {
	case e.contextOverflow():
		return KindContextOverflow
	case e.policy():
		return KindPolicy
	}
	return KindInvalidRequest
}

// classifyTransport is the verdict when no complete HTTP response arrived (behaviour §7.3).
func classifyTransport(o Outcome) Classification {
	c := Classification{Class: ClassTransient}
	switch o.Transport {
	case TransportConnect:
		c.Kind, c.Status, c.Message = KindConnect, http.StatusBadGateway, "upstream connection failed"
	case TransportReset:
		// Before any response the reset is a network failure like a refused connection
		// (openai-python raises APIConnectionError for both); once the response has started it
		// is a cut stream (behaviour §8.4, upstream_stream_truncated).
		c.Kind, c.Status, c.Message = KindConnect, http.StatusBadGateway, "upstream connection was reset"
		if o.Status != 0 {
			c.Kind, c.Message = KindPartialStream, "upstream response was cut off"
		}
	case TransportTimeout:
		c.Kind, c.Status, c.Message = KindTimeout, http.StatusGatewayTimeout, "upstream request timed out"
	case TransportIdle:
		c.Kind, c.Status, c.Message = KindTimeout, http.StatusGatewayTimeout, "upstream stream went idle"
	case TransportTruncated:
		c.Kind, c.Status, c.Message = KindPartialStream, http.StatusBadGateway, "upstream stream ended before completion"
	case TransportMalformed:
		c.Kind, c.Status, c.Message = KindUnknown, http.StatusBadGateway, "upstream response was malformed"
	case TransportCanceled:
		// 499: nginx's "client closed request", which Envoy also reports. Gateway outcomes
		// have no kind: the taxonomy's kinds describe upstream failures.
		c = Classification{Class: ClassGateway, Status: 499, Message: "client closed request"}
	default: // TransportGateway, and any value this version does not know
		c = Classification{Class: ClassGateway, Status: http.StatusInternalServerError, Message: "internal gateway error"}
	}
	return c
}

// fallbackMessage is the public message when the body offered none (an empty body, an HTML
// page, JSON without a message).
func fallbackMessage(status int, inBand bool) string {
	switch {
	case inBand:
		return "An error occurred during streaming" // openai-python _streaming.py's default
	case status == 529:
		return "Overloaded" // Anthropic's message for its non-standard status (§3.4)
	}
	if t := http.StatusText(status); t != "" {
		return t
	}
	return "upstream error"
}
