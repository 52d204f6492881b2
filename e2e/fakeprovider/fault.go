package fakeprovider

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrorKind names a provider failure. Each dialect renders it with its own status code and
// error body (see errors.go and the table in README.md).
type ErrorKind string

const (
	// RateLimited is a transient 429: OpenAI type "tokens"/code "rate_limit_exceeded",
	// Azure code "429", Anthropic rate_limit_error (wire-formats §1.4, §4.3, §3.4).
	RateLimited ErrorKind = "rate_limit"
	// QuotaExhausted is a non-retryable 429: OpenAI insufficient_quota, Azure "retry after
	// 86400 seconds", Anthropic rate_limit_error with details.error_code
	// enforced_spend_limit_reached (wire-formats summary item 5).
	QuotaExhausted ErrorKind = "quota"
	// ContextOverflow is a 400: OpenAI/Azure context_length_exceeded, Anthropic
	// "prompt is too long: N tokens > M maximum" (wire-formats summary item 4).
	ContextOverflow ErrorKind = "context_overflow"
	// ContentPolicy is a 400: OpenAI invalid_prompt, Azure code "content_filter" with
	// innererror ResponsibleAIPolicyViolation, Anthropic "Output blocked by content
	// filtering policy" (wire-formats summary item 7).
	ContentPolicy ErrorKind = "content_policy"
	// Overloaded is OpenAI/Azure 503 server_is_overloaded or Anthropic 529
	// overloaded_error with x-should-retry: true (wire-formats summary item 6).
	Overloaded ErrorKind = "overloaded"
	// ServerError is a 500: OpenAI server_error, Anthropic api_error.
	ServerError ErrorKind = "server_error"
	// Unauthorized is the 401 a wrong key gets.
	Unauthorized ErrorKind = "unauthorized"
	// PermissionDenied is a 403.
	PermissionDenied ErrorKind = "permission_denied"
	// NotFound is the 404 for an unknown model or deployment.
	NotFound ErrorKind = "not_found"
	// BadRequest is a generic 400 invalid_request_error.
	BadRequest ErrorKind = "bad_request"
)

func errorKinds() []ErrorKind {
	return []ErrorKind{RateLimited, QuotaExhausted, ContextOverflow, ContentPolicy, Overloaded,
		ServerError, Unauthorized, PermissionDenied, NotFound, BadRequest}
}

// End says how a streamed response ends. The zero value ends it normally.
type End int

const (
	// EndNormal finishes the stream with its finish reason, usage and terminal marker.
	EndNormal End = iota
	// EndError sends the dialect's in-band error after EndAfter pieces: a data-only
	// {"error":{…}} event then [DONE] for Chat (wire-formats §1.3), "event: error" for
	// Responses (§2.2, nested shape) and Anthropic (§3.3). On a JSON request it becomes the
	// HTTP error of the fault's ErrorKind.
	EndError
	// EndFailed sends Responses' terminal response.failed after EndAfter pieces (§2.2).
	// Other endpoints treat it as EndError.
	EndFailed
	// EndNoDone sends everything except the terminal marker: no "data: [DONE]" (Chat), no
	// message_stop (Anthropic), no response.completed (Responses, so no usage either).
	EndNoDone
	// EndCut closes the stream cleanly after EndAfter pieces: no finish reason, no usage,
	// no terminal marker. On a JSON request it sends half the body.
	EndCut
	// EndReset resets the TCP connection (RST) after EndAfter pieces. On a JSON request it
	// sends half the body first. Under HTTP/2 the stream is reset instead.
	EndReset
	// EndFiltered stops after EndAfter pieces with the output-filter outcome:
	// finish_reason "content_filter" (Chat, with Azure's content_filter_results),
	// stop_reason "refusal" (Anthropic), response.incomplete with reason content_filter
	// (Responses). Usage counts the pieces sent (filtered output is billed, §4.2).
	EndFiltered
	// EndNoStopReason finishes the stream with its terminal marker but no stop reason:
	// Anthropic's message_delta carries "stop_reason":null before message_stop, Chat's
	// finish chunk "finish_reason":null before [DONE]. Responses streams and JSON answers
	// end normally.
	EndNoStopReason
)

// lastEnd is the highest End, for parsing names.
const lastEnd = EndNoStopReason

// String returns the name used in FaultHeader's "end=" key.
func (e End) String() string {
	switch e {
	case EndNormal:
		return "normal"
	case EndError:
		return "error"
	case EndFailed:
		return "failed"
	case EndNoDone:
		return "nodone"
	case EndCut:
		return "cut"
	case EndReset:
		return "reset"
	case EndFiltered:
		return "filtered"
	case EndNoStopReason:
		return "nostop"
	}
	return "End(" + strconv.Itoa(int(e)) + ")"
}

// earlyEnd reports whether the end replaces the rest of the stream once EndAfter pieces
// have been sent.
func (e End) earlyEnd() bool {
	switch e {
	case EndError, EndFailed, EndCut, EndReset, EndFiltered:
		return true
	}
	return false
}

// UsageMode overrides whether a Chat stream carries the usage chunk.
type UsageMode int

const (
	// UsageAsRequested follows the request's stream_options.include_usage.
	UsageAsRequested UsageMode = iota
	// UsageOn sends the usage chunk even if the request did not ask for it.
	UsageOn
	// UsageOff never sends the usage chunk.
	UsageOff
)

// Always as Fault.Times makes a scripted fault apply to every matching request until
// Server.Reset.
const Always = -1

// Fault scripts how the fake answers one request (or Times requests). Zero fields do
// nothing, so Fault{} answers normally. Faults only apply to requests that pass routing,
// auth and body validation; those failures are answered as the provider would.
type Fault struct {
	// Path restricts the fault to requests whose path ends with it, e.g.
	// "/chat/completions" matches OpenAI's and Azure's routes. Empty matches any path.
	Path string
	// Model restricts the fault to requests for this model (the body "model", or the
	// Azure deployment on deployment-scoped routes). Empty matches any model.
	Model string
	// Times is how many matching requests consume the fault: 0 means 1, Always means every
	// matching request until Reset.
	Times int

	// Error answers with this failure before any body. With End set to EndError or
	// EndFailed it instead picks the in-band error (default ServerError for OpenAI/Azure,
	// Overloaded for Anthropic).
	Error ErrorKind
	// Status overrides the status code; alone it picks the ErrorKind matching the code.
	Status int
	// Type, Code, Message and Param override the fields of the provider-shaped error body
	// (OpenAI/Azure error.type/code/message/param, Anthropic error.type/message).
	Type, Code, Message, Param string
	// Body replaces the error body verbatim (HTTP error or in-band event data).
	Body string
	// RetryAfter is sent verbatim as retry-after (seconds or an HTTP date).
	RetryAfter string
	// RetryAfterMS is sent verbatim as retry-after-ms (wire-formats §4.3, §5).
	RetryAfterMS string
	// Header adds or replaces response headers.
	Header http.Header

	// HeaderDelay stalls before the status line: nothing at all is sent for this long.
	HeaderDelay time.Duration
	// FirstByteDelay sends the headers at once and delays the first body byte.
	FirstByteDelay time.Duration
	// Stall pauses a stream once StallAfter pieces have been sent (0: right after the
	// opening events), then carries on. JSON responses ignore it.
	Stall time.Duration
	// StallAfter is the number of content pieces sent before Stall.
	StallAfter int
	// Keepalive writes an SSE comment ": keepalive" this often during FirstByteDelay and
	// Stall on streams (the OpenRouter-style comment of wire-formats §1.3 and §7).
	Keepalive time.Duration

	// End says how the stream ends; EndAfter is the number of content pieces sent before
	// an early end (EndError, EndFailed, EndCut, EndReset, EndFiltered).
	End      End
	EndAfter int
	// Usage forces the Chat usage chunk on or off.
	Usage UsageMode
	// TinyWrites writes an SSE stream (and the half body of an EndCut or EndReset JSON
	// answer) in writes of 1 to 7 bytes, each flushed, cut anywhere (inside "data:", a JSON string, a UTF-8 sequence, a "\n\n"), so the reader
	// meets every event split across many reads.
	TinyWrites bool
	// Content overrides non-zero fields of the server's Content for this request.
	Content *Content
}

// isHTTPError reports whether the fault answers with an error status instead of a body.
func (f *Fault) isHTTPError() bool {
	if f.End == EndError || f.End == EndFailed {
		return false
	}
	return f.Error != "" || f.Status != 0
}

func (f *Fault) matches(path, model string) bool {
	if f.Path != "" && !strings.HasSuffix(path, f.Path) {
		return false
	}
	return f.Model == "" || f.Model == model
}

// kindForStatus picks the ErrorKind whose body fits a bare status code.
func kindForStatus(status int) ErrorKind {
	switch {
	case status == http.StatusUnauthorized:
		return Unauthorized
	case status == http.StatusForbidden:
		return PermissionDenied
	case status == http.StatusNotFound:
		return NotFound
	case status == http.StatusTooManyRequests:
		return RateLimited
	case status == http.StatusServiceUnavailable || status == statusOverloaded:
		return Overloaded
	case status >= 500:
		return ServerError
	default:
		return BadRequest
	}
}

// statusOverloaded is Anthropic's non-standard 529 (wire-formats §3.4).
const statusOverloaded = 529
