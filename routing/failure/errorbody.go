package failure

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/internal/rawjson"
)

// errorBody holds the fields of an upstream error body that classification reads. Every
// dialect of docs/wire-formats.md is read into this one shape:
//
//   - OpenAI, Azure, OpenAI-compatible: {"error":{"message","type","param","code"}} (§1.4, §4.3),
//     also as an in-band `data:` chunk of a 200 chat stream (§1.3);
//   - Anthropic: {"type":"error","error":{"type","message"},"request_id"} (§3.4), the same as an
//     `event: error` (§3.3);
//   - Responses `event: error`, nested {"type":"error","error":{...}} or flat
//     {"type":"error","code","message","param"} (§2.2), and `response.failed` with
//     response.error{code,message} (§2.2);
//   - tolerated extras from OpenAI-compatible servers: a numeric error.code (OpenRouter, §1.3),
//     a flat {"object":"error","message","type","code":400} body, {"error":"text"},
//     {"detail":"text"}, a JSON array holding one error object, plain text, an HTML page.
//
// Fields are read with gjson from one copy of the body, without decoding into maps.
type errorBody struct {
	typ, code, param, message string
	// inner is Azure's innererror.code / inner_error.code: the concept doc and the OpenAPI spec
	// spell the object differently, so both are read (docs/wire-formats.md §4.2, as LiteLLM's
	// _map_azure_exception does).
	inner string
	// spend is Anthropic's error.details.error_code ("enforced_spend_limit_reached", §3.5).
	spend string
	// status is a status number the body carries: Azure's "status":400, or a code that is a
	// status (Azure "429", OpenRouter 502). It only matters for in-band errors.
	status int
	// html marks a proxy's HTML error page, whose text is no public message.
	html bool
}

// parseErrorBody reads b, which may also be one SSE event ("event: error\ndata: {...}") when a
// caller passes the event rather than its data. It never fails: what it cannot read stays empty.
func parseErrorBody(b []byte) errorBody {
	var e errorBody
	s := rawjson.TrimSpace(b)
	if len(s) == 0 {
		return e
	}
	if s[0] == '<' {
		// A proxy's or load balancer's HTML page (e.g. a Cloudflare 502): nothing to copy.
		e.html = true
		return e
	}
	// One copy: every field below is a substring of it (gjson's Get on a string returns
	// substrings), so the Classification does not alias the caller's buffer.
	str := string(s)
	if data, ok := sseData(str); ok {
		str = strings.TrimSpace(data)
		if str == "" {
			return e
		}
	}
	switch str[0] {
	case '{':
		e.fromObject(gjson.Parse(str))
	case '[':
		// Some OpenAI-compatible servers wrap the error object in an array.
		if first := gjson.Get(str, "0"); first.IsObject() {
			e.fromObject(first)
		}
	default:
		// Plain text from an OpenAI-compatible server or a proxy (e.g. Envoy's "upstream connect
		// error or disconnect/reset before headers").
		e.message = str
	}
	if e.status == 0 {
		e.status = codeStatus(e.code)
	}
	return e
}

// fromObject reads the root object in one pass over its keys.
func (e *errorBody) fromObject(root gjson.Result) {
	var errv, resp, typ, code, param, msg, detail, status gjson.Result
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "error":
			errv = v
		case "response":
			resp = v
		case "type":
			typ = v
		case "code":
			code = v
		case "param":
			param = v
		case "message":
			msg = v
		case "detail":
			detail = v
		case "status":
			status = v
		}
		return true
	})
	if errv.IsObject() {
		e.fromError(errv)
		return
	}
	if resp.IsObject() {
		// Responses `response.failed`: {"type":"response.failed","response":{"error":{code,message}}}.
		if re := resp.Get("error"); re.IsObject() {
			e.fromError(re)
			return
		}
	}
	// Flat shapes: the Responses SDK's ResponseErrorEvent {type:"error",code,message,param}, and
	// vLLM-style {"object":"error","message","type","param","code":400}. The root "type" of an
	// event envelope ("error", "response.failed") is no error type.
	if t := scalar(typ); t != "error" && !strings.HasPrefix(t, "response.") {
		e.typ = t
	}
	e.code = scalar(code)
	e.param = scalar(param)
	e.message = text(msg)
	if e.message == "" {
		e.message = text(errv) // {"error":"model 'x' not found"}
	}
	if e.message == "" {
		e.message = text(detail) // {"detail":"Not Found"} (FastAPI-based servers)
	}
	e.status = statusNumber(status)
}

// fromError reads an error object: {"message","type","param","code"} plus Azure's status and
// inner error and Anthropic's details.
func (e *errorBody) fromError(v gjson.Result) {
	v.ForEach(func(k, f gjson.Result) bool {
		switch k.Str {
		case "type":
			e.typ = scalar(f)
		case "code":
			e.code = scalar(f)
		case "param":
			e.param = scalar(f)
		case "message":
			e.message = text(f)
		case "innererror", "inner_error":
			if f.IsObject() {
				e.inner = f.Get("code").Str
			}
		case "details":
			if f.IsObject() {
				e.spend = f.Get("error_code").Str
			}
		case "status":
			e.status = statusNumber(f)
		}
		return true
	})
}

// scalar renders a JSON scalar as the provider's field value: a string as is, a number as its
// literal (OpenRouter's numeric error.code becomes "429"), null and containers as "".
func scalar(v gjson.Result) string {
	switch v.Type {
	case gjson.String:
		return v.Str
	case gjson.Number, gjson.True, gjson.False:
		return v.Raw
	}
	return ""
}

// text is a JSON string's value, or "" for anything else.
func text(v gjson.Result) string {
	if v.Type == gjson.String {
		return v.Str
	}
	return ""
}

// statusNumber reads an HTTP status from a JSON number or numeric string, 0 if none.
func statusNumber(v gjson.Result) int {
	switch v.Type {
	case gjson.Number:
		if f := v.Num; f >= 100 && f <= 599 && f == float64(int(f)) {
			return int(f)
		}
	case gjson.String:
		return codeStatus(v.Str)
	}
	return 0
}

// codeStatus reads a code that is an HTTP status: Azure sends "429", "401", "404" as the code
// (docs/wire-formats.md §4.3), OpenRouter a number (§1.3).
func codeStatus(code string) int {
	if len(code) != 3 {
		return 0
	}
	n := 0
	for i := 0; i < 3; i++ {
		c := code[i]
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	if n < 100 || n > 599 {
		return 0
	}
	return n
}

// sseData returns the first data payload of an SSE event (not [DONE]), when s is SSE-framed.
// Error events are a single data line (docs/wire-formats.md §1.3, §2.2, §3.3), so multi-line data
// is not joined.
func sseData(s string) (string, bool) {
	if !strings.HasPrefix(s, "data:") && !strings.HasPrefix(s, "event:") && !strings.HasPrefix(s, ":") {
		return "", false
	}
	for s != "" {
		line := s
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		line = strings.TrimSuffix(line, "\r")
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			v = strings.TrimPrefix(v, " ")
			if v != "[DONE]" {
				return v, true
			}
		}
	}
	return "", true
}
