package stream

import (
	"unsafe"

	"github.com/tidwall/gjson"
)

// view is b as a string without copying, for gjson: gjson.GetBytes copies every result to
// keep it independent of b, which would allocate per event. The string must not outlive
// the call that reads b (results are only inspected, never kept).
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// nonEmpty reports whether v carries something: a non-empty string, a non-empty array or
// object, a number or true. Strings are judged on Raw, so that escaped text is not
// unescaped (which allocates).
func nonEmpty(v gjson.Result) bool {
	switch v.Type {
	case gjson.String:
		return len(v.Raw) > 2
	case gjson.JSON:
		for i := 1; i < len(v.Raw); i++ {
			switch v.Raw[i] {
			case ' ', '\t', '\r', '\n':
				continue
			case ']', '}':
				return false
			}
			return true
		}
		return false
	case gjson.Number, gjson.True:
		return true
	}
	return false
}

// isNull reports whether v is absent or null.
func isNull(v gjson.Result) bool { return v.Type == gjson.Null }

// trimSpace drops the JSON whitespace around b.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
