package stream

import (
	"encoding/json"
	"strconv"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
)

// ErrorInfo is the failure told to the client after commit (behaviour §8.2): OpenAI's
// error.type / error.code, Anthropic's error.type, and the public message.
type ErrorInfo struct {
	Type    string
	Code    string
	Message string
}

// AppendError appends to dst the in-band error event that ends a committed stream in the
// client's dialect (behaviour §8.2), shaped like the provider's own stream error and carrying
// requestID, so that the SDKs raise an error instead of returning a silent truncation
// (TestSDKsRaiseTheErrorEvent):
//
//   - Chat: data: {"error":{"message","type","param":null,"code"}} then data: [DONE], as
//     OpenAI sends it (wire-formats §1.3); openai-go returns a *ssestream.StreamError whose
//     message holds the error object, openai-python raises APIError. OpenAI's error objects
//     have no request-id field, so the id goes at the end of the message, where OpenAI
//     itself puts it ("... (Please include the request ID req_... in your message.)").
//   - Responses: event: error with {"type":"error","sequence_number","code","message",
//     "param":null,"error":{"type","code","message","param":null}}: the flat fields are the
//     SDK's ResponseErrorEvent, the nested "error" is the wire shape (§2.2) and what makes
//     openai-go (a top-level "error" key) and openai-python raise. The sequence number
//     follows the stream's last.
//   - Anthropic: event: error with {"type":"error","error":{"type","message"},
//     "request_id"}, the body of Anthropic's own errors (§3.3–3.4); anthropic-sdk-go
//     returns an *anthropic.Error whose text holds the body.
func (c *Classifier) AppendError(dst []byte, e ErrorInfo, requestID string) []byte {
	return AppendErrorEvent(dst, c.d, c.seq+1, e, requestID)
}

// AppendErrorEvent is AppendError for a stream of dialect d whose next Responses
// sequence_number is seq.
func AppendErrorEvent(dst []byte, d dialect.Dialect, seq int64, e ErrorInfo, requestID string) []byte {
	switch d {
	case dialect.Messages:
		typ := e.Type
		if typ == "" {
			typ = "api_error"
		}
		dst = append(dst, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"...)
		dst = appendString(dst, typ)
		dst = append(dst, `,"message":`...)
		dst = appendString(dst, e.Message)
		dst = append(dst, `},"request_id":`...)
		dst = appendString(dst, requestID)
		return append(dst, "}\n\n"...)
	case dialect.Responses:
		msg := withRequestID(e.Message, requestID)
		dst = append(dst, "event: error\ndata: {\"type\":\"error\",\"sequence_number\":"...)
		dst = strconv.AppendInt(dst, max(seq, 0), 10)
		dst = append(dst, `,"code":`...)
		dst = appendCode(dst, e.Code)
		dst = append(dst, `,"message":`...)
		dst = appendString(dst, msg)
		dst = append(dst, `,"param":null,"error":`...)
		dst = appendOpenAIError(dst, e, msg)
		return append(dst, "}\n\n"...)
	default:
		dst = append(dst, `data: {"error":`...)
		dst = appendOpenAIError(dst, e, withRequestID(e.Message, requestID))
		return append(dst, "}\n\ndata: [DONE]\n\n"...)
	}
}

func appendOpenAIError(dst []byte, e ErrorInfo, msg string) []byte {
	typ := e.Type
	if typ == "" {
		typ = "server_error"
	}
	dst = append(dst, `{"message":`...)
	dst = appendString(dst, msg)
	dst = append(dst, `,"type":`...)
	dst = appendString(dst, typ)
	dst = append(dst, `,"param":null,"code":`...)
	dst = appendCode(dst, e.Code)
	return append(dst, '}')
}

func withRequestID(msg, requestID string) string {
	if requestID == "" {
		return msg
	}
	if msg == "" {
		return "(request id: " + requestID + ")"
	}
	return msg + " (request id: " + requestID + ")"
}

func appendCode(dst []byte, code string) []byte {
	if code == "" {
		return append(dst, "null"...)
	}
	return appendString(dst, code)
}

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	b, err := json.Marshal(s)
	if err != nil { // a string always marshals
		return append(dst, `""`...)
	}
	return append(dst, b...)
}
