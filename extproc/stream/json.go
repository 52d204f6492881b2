package stream

import (
	"unsafe"

	"github.com/switchyard-gw/switchyard/internal/rawjson"
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

// The walkers (internal/rawjson) read JSON without materialising string values. gjson
// unescapes every string value it returns or iterates over (ForEach), which allocates
// whenever the text has an escape (\n, \", \u...) — that is, on most content deltas. Output
// checks only need to know whether a value is empty, so they read raw values; gjson is kept
// for fields that carry no text (types, numbers, usage).

// member is the raw value of obj's member key, or "".
func member(obj, key string) string {
	var out string
	rawjson.Members(obj, 0, func(k, v string) bool {
		if k == key {
			out = v
			return false
		}
		return true
	})
	return out
}

// carries reports whether the raw JSON value v holds something: a non-empty string, array
// or object, a number or true (not null, false, "", [] or {}).
func carries(v string) bool {
	if v == "" {
		return false
	}
	switch v[0] {
	case '"':
		return len(v) > 2
	case '[', '{':
		i := rawjson.SkipSpace(v, 1)
		return i < len(v) && v[i] != ']' && v[i] != '}'
	case 'n', 'f':
		return false
	}
	return true
}
