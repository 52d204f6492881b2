package dialect

import (
	"fmt"
	"net/http"
	"time"

	"github.com/switchyard-gw/switchyard/routing"
)

// Error is an answer switchyard gives a client itself, independent of how it is rendered:
// a request it refuses (unknown path, bad body, unknown model) or a routing stop
// (routing.StopError). Render gives its bytes in Family's shape.
type Error struct {
	Family Family
	Status int
	// Code is the machine-readable code: OpenAI's error.code, Anthropic's
	// error.details.error_code (e.g. model_not_found, rate_limit_exceeded).
	Code string
	// Type is the provider's error type when an upstream error is passed through; empty
	// means derived from Status (and Code) for the family.
	Type string
	// Param is OpenAI's error.param: the request field at fault, if any.
	Param   string
	Message string
	// RetryAfter, when positive, is sent as Retry-After (and retry-after-ms).
	RetryAfter time.Duration
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// Codes switchyard itself answers with, beside the routing.StopError codes.
const (
	CodeModelNotFound   = "model_not_found"
	CodeInvalidJSON     = "invalid_json"
	CodeInvalidRequest  = "invalid_request"
	CodeRequestTooLarge = "request_too_large"
	CodeUnknownURL      = "unknown_url"
)

// UnknownPath is the 404 for a method and path switchyard does not serve. OpenAI words it
// "Invalid URL (POST /v1/…)" (e2e/fakeprovider mirrors it); Anthropic answers a bare
// not_found_error.
func UnknownPath(f Family, method, path string) *Error {
	msg := fmt.Sprintf("Invalid URL (%s %s)", method, path)
	if f == Anthropic {
		msg = "Not Found"
	}
	return &Error{Family: f, Status: http.StatusNotFound, Code: CodeUnknownURL, Message: msg}
}

// ModelNotFound is the 404 for a request without a model, or for a model switchyard does
// not serve (model == ""), worded as OpenAI words it (wire-formats §1.4).
func ModelNotFound(f Family, model string) *Error {
	if model == "" {
		return &Error{Family: f, Status: http.StatusNotFound, Code: CodeModelNotFound, Param: "model",
			Message: "You must provide a model parameter."}
	}
	return &Error{Family: f, Status: http.StatusNotFound, Code: CodeModelNotFound, Param: "model",
		Message: "The model `" + model + "` does not exist or you do not have access to it."}
}

// TooLarge is the 413 for a body over limit bytes.
func TooLarge(f Family, limit int) *Error {
	return &Error{Family: f, Status: http.StatusRequestEntityTooLarge, Code: CodeRequestTooLarge,
		Message: fmt.Sprintf("The request body is larger than the gateway's limit of %d bytes.", limit)}
}

// invalidJSON is the 400 for a body that is not one JSON object.
func invalidJSON(f Family) *Error {
	return &Error{Family: f, Status: http.StatusBadRequest, Code: CodeInvalidJSON,
		Message: "The request body is not a valid JSON object."}
}

// invalidField is the 400 for a field of the wrong type or range.
func invalidField(f Family, param, want string) *Error {
	return &Error{Family: f, Status: http.StatusBadRequest, Code: CodeInvalidRequest, Param: param,
		Message: "Invalid value for `" + param + "`: expected " + want + "."}
}

// duplicateField is the 400 for a top-level key given twice.
func duplicateField(f Family, param string) *Error {
	return &Error{Family: f, Status: http.StatusBadRequest, Code: CodeInvalidRequest, Param: param,
		Message: "Duplicate key `" + param + "` in the request body."}
}

// FromStop is the client's answer for a stopped request (behaviour §7.4–§7.5). An upstream error
// keeps the provider's status, type, code and sanitised message; switchyard's own stops keep
// their code, with the type derived for the family.
func FromStop(f Family, s *routing.StopError) *Error {
	e := &Error{Family: f, Status: s.Status, Code: s.Code, Message: s.Message, RetryAfter: s.RetryAfter}
	if s.Upstream {
		e.Type = s.Type
	}
	if e.Status == 0 {
		e.Status = http.StatusInternalServerError
	}
	return e
}
