package dialect

import (
	"math"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/internal/rawjson"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
)

// Request is what routing needs from a request body.
type Request struct {
	Dialect   Dialect
	Model     string
	Stream    bool
	Operation config.Operation
	Facts     routing.Facts
}

// Parser reads request bodies within limits.
type Parser struct {
	// MaxBodyBytes bounds a request body; 0 means no bound of the parser's own.
	MaxBodyBytes int
}

// CheckLength refuses, with a 413 in d's shape, a request whose content-length n is over
// the limit, before its body is read.
func (p Parser) CheckLength(d Dialect, n int64) error {
	if p.MaxBodyBytes > 0 && n > int64(p.MaxBodyBytes) {
		return TooLarge(d.Family(), p.MaxBodyBytes)
	}
	return nil
}

// Parse reads the routing facts of a d request body in one pass over its top-level keys,
// without decoding it. Errors are *Error in d's shape: 413 over the limit, 400 for a body
// that is not a JSON object or a field of the wrong type, 404 model_not_found without a
// model (whether the model is served is the caller's question: answer ModelNotFound).
func (p Parser) Parse(d Dialect, body []byte) (Request, error) {
	f := d.Family()
	if p.MaxBodyBytes > 0 && len(body) > p.MaxBodyBytes {
		return Request{}, TooLarge(f, p.MaxBodyBytes)
	}
	open := objectStart(body)
	if open < 0 || !validJSON(body) {
		return Request{}, invalidJSON(f)
	}
	r := Request{Dialect: d, Operation: config.OpText, Facts: routing.Facts{API: d.API()}}
	if d == Embeddings {
		r.Operation = config.OpEmbeddings
	}
	var (
		model    gjson.Result
		stream   gjson.Result
		parallel gjson.Result
		bad      *Error
		hasTools bool
		w        = walker{dialect: d}
	)
	// gjson.GetBytes reads a []byte the same way (unsafe string over the bytes). Every
	// string kept past this call is cloned (the model), so the caller's buffer stays theirs.
	json := unsafe.String(unsafe.SliceData(body), len(body))
	var seen uint32
	// members rather than gjson's ForEach, which reads strings byte by byte and decodes
	// every value: it unescapes (and allocates for) long prompt strings that are never read.
	members(json, open, func(key, raw string) bool {
		bit := routingKey(key)
		if bit == 0 {
			return true
		}
		// JSON decoders keep the last of duplicate keys (Go, Python) and gjson the first:
		// {"model":"cheap","model":"dear"} would be routed as one model and served as the
		// other.
		if seen&bit != 0 {
			bad = duplicateField(f, key)
			return false
		}
		seen |= bit
		switch key {
		case "messages", "input", "system", "instructions":
			if promptField(d, key) {
				w.prompt(raw)
			}
			return true
		case "tools", "functions": // functions: Chat's legacy tools
			if d != Embeddings && (key == "tools" || d == Chat) {
				hasTools = hasTools || nonEmptyArray(raw)
				w.text += len(raw)
			}
			return true
		}
		v := gjson.Parse(raw) // the fields below are small
		switch key {
		case "model":
			model = v
		case "stream":
			stream = v
		case "parallel_tool_calls":
			if d == Chat || d == Responses {
				parallel = v
			}
		case "tool_choice":
			if d == Messages {
				// Anthropic allows parallel tool use unless disabled; an explicit false asks
				// for it.
				if dis := v.Get("disable_parallel_tool_use"); dis.Type == gjson.False {
					parallel = gjson.Result{Type: gjson.True}
				}
			}
		case "response_format":
			r.Facts.StructuredOutput = r.Facts.StructuredOutput || d == Chat && isJSONSchema(v)
		case "text":
			r.Facts.StructuredOutput = r.Facts.StructuredOutput || d == Responses && isJSONSchema(v.Get("format"))
		case "output_config", "output_format":
			// Anthropic structured outputs: output_config.format (anthropic-sdk-go
			// OutputConfigParam.Format), earlier the beta output_format.
			if d == Messages {
				if key == "output_config" {
					v = v.Get("format")
				}
				r.Facts.StructuredOutput = r.Facts.StructuredOutput || isJSONSchema(v)
			}
		case "max_tokens", "max_completion_tokens", "max_output_tokens":
			if !maxTokensField(d, key) {
				break
			}
			n, ok := tokenCount(v)
			if !ok {
				bad = invalidField(f, key, "a non-negative integer")
				return false
			}
			// max_completion_tokens supersedes the deprecated max_tokens (wire-formats §1.1).
			if (key == "max_completion_tokens" && v.Type != gjson.Null) || r.Facts.MaxOutputTokens == 0 {
				r.Facts.MaxOutputTokens = n
			}
		}
		return true
	})
	if bad != nil {
		return Request{}, bad
	}
	switch model.Type {
	case gjson.String:
		if model.Str == "" {
			return Request{}, ModelNotFound(f, "")
		}
		r.Model = strings.Clone(model.Str)
	case gjson.Null:
		return Request{}, ModelNotFound(f, "")
	default:
		return Request{}, invalidField(f, "model", "a string")
	}
	if d != Embeddings { // embeddings answer JSON only (behaviour §6.2)
		switch stream.Type {
		case gjson.True:
			r.Stream = true
		case gjson.False, gjson.Null:
		default:
			return Request{}, invalidField(f, "stream", "a boolean")
		}
	}
	r.Facts.Tools = hasTools
	r.Facts.ParallelToolCalls = hasTools && parallel.Type == gjson.True
	r.Facts.Modalities = w.modalities
	r.Facts.PromptTokens = w.tokens()
	return r, nil
}

// routingKey is the bit of a top-level key Parse reads (in any dialect), 0 for others.
func routingKey(key string) uint32 {
	switch key {
	case "model":
		return 1 << 0
	case "stream":
		return 1 << 1
	case "stream_options":
		return 1 << 2
	case "messages":
		return 1 << 3
	case "input":
		return 1 << 4
	case "system":
		return 1 << 5
	case "instructions":
		return 1 << 6
	case "tools":
		return 1 << 7
	case "functions":
		return 1 << 8
	case "parallel_tool_calls":
		return 1 << 9
	case "tool_choice":
		return 1 << 10
	case "response_format":
		return 1 << 11
	case "text":
		return 1 << 12
	case "output_config":
		return 1 << 13
	case "output_format":
		return 1 << 14
	case "max_tokens":
		return 1 << 15
	case "max_completion_tokens":
		return 1 << 16
	case "max_output_tokens":
		return 1 << 17
	}
	return 0
}

// objectStart is the index of body's first non-space byte if it opens an object, else -1.
func objectStart(body []byte) int {
	for i, c := range body {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return i
		}
		return -1
	}
	return -1
}

func nonEmptyArray(raw string) bool {
	return len(raw) > 2 && raw[0] == '[' && strings.TrimSpace(raw[1:len(raw)-1]) != ""
}

func isJSONSchema(format gjson.Result) bool {
	return format.Get("type").Str == "json_schema"
}

// promptField reports whether key carries prompt content in d.
func promptField(d Dialect, key string) bool {
	switch d {
	case Chat:
		return key == "messages"
	case Responses:
		return key == "input" || key == "instructions"
	case Messages:
		return key == "messages" || key == "system"
	case Embeddings:
		return key == "input"
	}
	return false
}

// maxTokensField reports whether key bounds the output in d: Chat max_completion_tokens
// (or the deprecated max_tokens), Responses max_output_tokens, Messages max_tokens.
func maxTokensField(d Dialect, key string) bool {
	switch d {
	case Chat:
		return key == "max_tokens" || key == "max_completion_tokens"
	case Responses:
		return key == "max_output_tokens"
	case Messages:
		return key == "max_tokens"
	}
	return false
}

// maxTokenCount caps token counts read from a body, so that sums of them cannot overflow
// (no model has a window near 2^40 tokens).
const maxTokenCount = 1 << 40

// tokenCount reads a non-negative integer field; null reads as unset (0).
func tokenCount(v gjson.Result) (int64, bool) {
	switch v.Type {
	case gjson.Null:
		return 0, true
	case gjson.Number:
		if v.Num < 0 || v.Num != math.Trunc(v.Num) {
			return 0, false
		}
		return int64(min(v.Num, maxTokenCount)), true
	}
	return 0, false
}

// The scan below reads JSON that passed validJSON (gjson.ValidBytes's answer), without
// decoding values it does not need. On valid JSON every span is fixed by the grammar, so it
// finds the same members and values as gjson's ForEach; keys and "type" values are
// decoded by gjson itself.

// members calls fn with the key (decoded) and raw value of each member of the object at
// raw[i] ('{'), until fn returns false, and returns the index after the object (len(raw)
// when fn stopped the walk or the object is malformed, which validJSON rules out).
func members(raw string, i int, fn func(key, v string) bool) int {
	end := rawjson.Members(raw, i, func(key, v string) bool { return fn(decodedKey(key), v) })
	if end < 0 {
		return len(raw)
	}
	return end
}

// decodedKey is a raw member key (between its quotes) as gjson decodes it.
func decodedKey(key string) string {
	if strings.IndexByte(key, '\\') < 0 {
		return key
	}
	return gjson.Parse(`"` + key + `"`).Str
}

// stringValue is the string a raw JSON value holds, as gjson decodes it (Result.Str): ""
// for a value that is not a string.
func stringValue(v string) string {
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	if strings.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1]
	}
	return gjson.Parse(v).Str
}
