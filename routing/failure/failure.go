// Package failure owns the failure taxonomy of behaviour §7.3: it turns what an upstream attempt
// produced (a transport error, an HTTP status with headers and an error body, or an in-band
// error event inside a 200 stream) into a class that decides what routing does next, a
// normalised kind, the provider's Retry-After and a sanitised public message, for each
// provider dialect of docs/wire-formats.md.
package failure

import (
	"net/http"
	"time"
)

// Class is a failure's effect on routing (behaviour §7.3).
type Class uint8

const (
	// ClassNone: not a failure.
	ClassNone Class = iota
	// ClassRequest: the request itself is at fault (400-class input, context or content
	// faults). Ends the request with the provider's status (or moves to a dedicated
	// context-window / content-policy fallback chain). Never lowers health.
	ClassRequest
	// ClassThrottle: a provider 429. Opens the failure domain's capacity circuit; no health
	// penalty; not counted toward allowedFails. With Quota set, the quota is exhausted and
	// the domain is treated as a configuration-like outage.
	ClassThrottle
	// ClassTransient: timeouts, network failures, provider 5xx/529, malformed protocol,
	// truncated streams. Retried; counts toward the circuit.
	ClassTransient
	// ClassConfiguration: 401/403, unknown provider model or deployment. Quarantines the
	// deployment (behaviour §5.6).
	ClassConfiguration
	// ClassGateway: our own faults and the client's cancel. Penalises no deployment.
	ClassGateway
	// ClassIncompatible: the candidate cannot take this request (found by the gateway's own
	// preprocessing). Health-neutral; another candidate or fallback may take it.
	ClassIncompatible
)

func (c Class) String() string {
	switch c {
	case ClassNone:
		return "none"
	case ClassRequest:
		return "request"
	case ClassThrottle:
		return "throttle"
	case ClassTransient:
		return "transient"
	case ClassConfiguration:
		return "configuration"
	case ClassGateway:
		return "gateway"
	case ClassIncompatible:
		return "incompatible"
	default:
		return "unknown"
	}
}

// Kind is the normalised error kind (behaviour §7.3, from seed 003).
type Kind string

const (
	KindNone            Kind = ""
	KindConnect         Kind = "connect"
	KindTimeout         Kind = "timeout"
	KindRateLimit       Kind = "rate_limit"
	KindOverloaded      Kind = "overloaded"
	KindServerError     Kind = "server_error"
	KindInvalidRequest  Kind = "invalid_request"
	KindAuth            Kind = "auth"
	KindPolicy          Kind = "policy"
	KindContextOverflow Kind = "context_overflow"
	KindPartialStream   Kind = "partial_stream"
	KindUnknown         Kind = "unknown"
)

// Provider is a deployment's provider kind, which fixes the error dialect.
type Provider string

const (
	ProviderOpenAI           Provider = "openai"
	ProviderAzureOpenAI      Provider = "azure-openai"
	ProviderAnthropic        Provider = "anthropic"
	ProviderOpenAICompatible Provider = "openai-compatible"
)

// Transport is what went wrong below HTTP, when nothing (or not everything) arrived.
type Transport uint8

const (
	// TransportNone: an HTTP response arrived (see Outcome.Status).
	TransportNone Transport = iota
	// TransportConnect: no connection (refused, DNS, TLS handshake).
	TransportConnect
	// TransportReset: the connection or stream was reset before the response completed.
	TransportReset
	// TransportTimeout: the response did not arrive within the response timeout.
	TransportTimeout
	// TransportIdle: a stream stayed silent longer than the idle timeout.
	TransportIdle
	// TransportTruncated: a stream ended cleanly but before its protocol's end marker and
	// with no finish reason (behaviour §8.4: upstream_stream_truncated).
	TransportTruncated
	// TransportMalformed: the upstream broke its protocol (unparseable stream or body).
	TransportMalformed
	// TransportCanceled: the client went away.
	TransportCanceled
	// TransportGateway: the gateway itself failed (its own bug or resource limit).
	TransportGateway
)

// Outcome is what one upstream attempt produced, as far as failure classification cares.
type Outcome struct {
	Provider  Provider
	Transport Transport
	// Status is the upstream HTTP status (0 when no response arrived). For an in-band stream
	// error it is the stream's status, normally 200.
	Status int
	// Header holds the upstream response headers (Retry-After, retry-after-ms, ...).
	Header http.Header
	// Body is the upstream error body, or for an in-band error the event's data JSON.
	Body []byte
	// InBand marks Body as an error event inside a 200 stream (behaviour §8.5).
	InBand bool
	// Event is the SSE event name of an in-band error ("error", "response.failed"), if any.
	Event string
	// Secrets are the credentials redacted literally from the provider's message, type, code
	// and param (the configured keys, the client's key); nil redacts by shape only.
	Secrets *Secrets
}

// Succeeded reports whether o is a 2xx response that is not an in-band error: Classify reads
// nothing else of it, so a caller may leave its Header and Body out.
func (o Outcome) Succeeded() bool {
	return o.Transport == TransportNone && !o.InBand && o.Status >= 200 && o.Status <= 299
}

// Classification is the verdict on an Outcome.
type Classification struct {
	Class Class
	Kind  Kind
	// Quota: a 429 that means the quota or spend limit is exhausted (OpenAI
	// insufficient_quota, Anthropic enforced_spend_limit_reached / billing_error, Azure
	// "retry after 86400 seconds"): not retried against that failure domain.
	Quota bool
	// RetryAfter is the provider's requested wait (retry-after-ms, then retry-after seconds
	// or HTTP date, then OpenAI's x-ratelimit-reset-* durations), uncapped; 0 when absent.
	RetryAfter time.Duration
	// RetryAfterHeader: RetryAfter is the provider's own Retry-After or retry-after-ms, not a
	// hint read from x-ratelimit-reset-* or the message. Routing honours both; only the
	// provider's own may reach a client (routing.StopError.RetryAfter).
	RetryAfterHeader bool
	// Status is what a client should see if this is the request's final outcome: the
	// upstream status for HTTP errors, the equivalent status for in-band errors (e.g. 529
	// for Anthropic overloaded_error), 502/504 for transport failures.
	Status int
	// Type, Code and Param are the provider's error fields, when present.
	Type  string
	Code  string
	Param string
	// Message is the provider's public message, sanitised: no credentials or key fragments,
	// bounded length.
	Message string
}
