package dialect

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Header is one HTTP header to send.
type Header struct {
	Name, Value string
}

// Response is a complete answer: status, headers and body.
type Response struct {
	Status  int
	Headers []Header
	Body    []byte
}

// Header names switchyard answers with (lower case, as HTTP/2 and ext_proc carry them).
const (
	HeaderContentType  = "content-type"
	HeaderRetryAfter   = "retry-after"
	HeaderRetryAfterMS = "retry-after-ms"
	// HeaderOpenAIRequestID is where OpenAI's SDKs read the request id (openai-python
	// `_request_id`, openai-go Response.Header).
	HeaderOpenAIRequestID = "x-request-id"
	// HeaderAnthropicRequestID is where anthropic-sdk-go reads Error.RequestID
	// (internal/requestconfig: res.Header.Get("request-id")).
	HeaderAnthropicRequestID = "request-id"
)

const jsonContentType = "application/json"

// Render is e as the client's answer: e.Family's body shape (behaviour §13.1), content-type, the
// request id in the dialect's request-id header (and in Anthropic's body field request_id,
// as Anthropic's own errors carry it, wire-formats §3.4), and, when e.RetryAfter is
// positive, Retry-After in whole seconds rounded up (never earlier than the real time,
// behaviour §7.5) beside retry-after-ms, which every official SDK reads first (wire-formats §5).
func (e *Error) Render(requestID string) Response {
	r := Response{Status: e.Status, Headers: make([]Header, 0, 4)}
	r.Headers = append(r.Headers, Header{HeaderContentType, jsonContentType})
	if e.RetryAfter > 0 {
		r.Headers = append(r.Headers,
			Header{HeaderRetryAfter, strconv.FormatInt(ceilDiv(e.RetryAfter, time.Second), 10)},
			Header{HeaderRetryAfterMS, strconv.FormatInt(ceilDiv(e.RetryAfter, time.Millisecond), 10)})
	}
	if e.Family == Anthropic {
		if requestID != "" {
			r.Headers = append(r.Headers, Header{HeaderAnthropicRequestID, requestID})
		}
		r.Body = mustJSON(anthropicBody(e, requestID))
		return r
	}
	if requestID != "" {
		r.Headers = append(r.Headers, Header{HeaderOpenAIRequestID, requestID})
	}
	r.Body = mustJSON(openAIBody(e))
	return r
}

func ceilDiv(d, unit time.Duration) int64 {
	return int64((d + unit - 1) / unit)
}

// openAIError is OpenAI's error object; param and code are null when unset, as OpenAI
// sends them (wire-formats §1.4).
type openAIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func openAIBody(e *Error) any {
	oe := openAIError{Message: e.Message, Type: openAIType(e)}
	if e.Param != "" {
		oe.Param = &e.Param
	}
	if e.Code != "" {
		oe.Code = &e.Code
	}
	return struct {
		Error openAIError `json:"error"`
	}{oe}
}

// openAIType keeps an upstream OpenAI-family type and otherwise names the status. OpenAI
// documents few type names (invalid_request_error, server_error,
// service_unavailable_error, wire-formats §1.4); the SDKs pick their error classes by
// status, so the type only has to read right.
func openAIType(e *Error) string {
	if e.Type != "" && !anthropicOnly(e.Type) {
		return e.Type
	}
	switch s := e.Status; {
	case s == http.StatusUnauthorized:
		return "authentication_error"
	case s == http.StatusForbidden:
		return "permission_error"
	case s == http.StatusTooManyRequests:
		return "rate_limit_error"
	case s == http.StatusServiceUnavailable:
		return "service_unavailable_error"
	case s == http.StatusGatewayTimeout:
		return "timeout_error"
	case s >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

type anthropicError struct {
	Type    string            `json:"type"`
	Message string            `json:"message"`
	Details *anthropicDetails `json:"details,omitempty"`
}

// anthropicDetails is where Anthropic puts the machine-readable cause
// (anthropic-sdk-go Error.Details: "error_code names the cause").
type anthropicDetails struct {
	ErrorCode string `json:"error_code"`
}

func anthropicBody(e *Error, requestID string) any {
	ae := anthropicError{Type: anthropicType(e), Message: e.Message}
	if e.Code != "" {
		ae.Details = &anthropicDetails{ErrorCode: e.Code}
	}
	return struct {
		Type      string         `json:"type"`
		Error     anthropicError `json:"error"`
		RequestID string         `json:"request_id,omitempty"`
	}{"error", ae, requestID}
}

// Anthropic's error types (docs.claude.com/en/api/errors, anthropic-sdk-go shared.ErrorType;
// wire-formats §3.4).
const (
	anthInvalidRequest = "invalid_request_error"
	anthAuthentication = "authentication_error"
	anthBilling        = "billing_error"
	anthPermission     = "permission_error"
	anthNotFound       = "not_found_error"
	anthTooLarge       = "request_too_large"
	anthRateLimit      = "rate_limit_error"
	anthTimeout        = "timeout_error"
	anthAPI            = "api_error"
	anthOverloaded     = "overloaded_error"
)

// anthropicOnly reports whether t is one of Anthropic's type names that OpenAI does not
// use (invalid_request_error is both).
func anthropicOnly(t string) bool {
	switch t {
	case anthAuthentication, anthBilling, anthPermission, anthNotFound, anthTooLarge,
		anthRateLimit, anthTimeout, anthAPI, anthOverloaded:
		return true
	}
	return false
}

// anthropicType keeps an upstream Anthropic type and otherwise maps the status as
// Anthropic's documented table does (400 invalid_request_error, "also used for other 4XX
// status codes"; 529 overloaded_error). A 503 of switchyard's model_overloaded (every
// circuit cooling, behaviour §7.5) is Anthropic's overloaded_error; other 503s are api_error.
func anthropicType(e *Error) string {
	if e.Type == anthInvalidRequest || anthropicOnly(e.Type) {
		return e.Type
	}
	switch s := e.Status; {
	case s == http.StatusUnauthorized:
		return anthAuthentication
	case s == http.StatusPaymentRequired:
		return anthBilling
	case s == http.StatusForbidden:
		return anthPermission
	case s == http.StatusNotFound:
		return anthNotFound
	case s == http.StatusRequestEntityTooLarge:
		return anthTooLarge
	case s == http.StatusTooManyRequests:
		return anthRateLimit
	case s == http.StatusGatewayTimeout:
		return anthTimeout
	case s == 529, s == http.StatusServiceUnavailable && e.Code == "model_overloaded":
		return anthOverloaded
	case s >= 500:
		return anthAPI
	default:
		return anthInvalidRequest
	}
}

// mustJSON marshals v, which holds only strings and pointers to strings: it cannot fail.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("dialect: marshal of a fixed shape failed: " + err.Error())
	}
	return b
}
