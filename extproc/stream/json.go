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

// The walkers below read JSON without materialising string values. gjson unescapes every
// string value it returns or iterates over (ForEach), which allocates whenever the text has
// an escape (\n, \", \u...) — that is, on most content deltas. Output checks only need to
// know whether a value is empty, so they read raw values here; gjson is kept for fields
// that carry no text (types, numbers, usage).

// fields calls fn with the raw key (without quotes) and raw value of each member of the
// JSON object obj, until fn returns false. Malformed input ends the walk early.
func fields(obj string, fn func(key, val string) bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return
		}
		kEnd := skipString(obj, i)
		if kEnd < 0 {
			return
		}
		key := obj[i+1 : kEnd-1]
		i = skipSpace(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		i = skipSpace(obj, i+1)
		vEnd := skipValue(obj, i)
		if vEnd < 0 {
			return
		}
		if !fn(key, obj[i:vEnd]) {
			return
		}
		i = skipSpace(obj, vEnd)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i++
	}
}

// elements calls fn with each raw element of the JSON array arr, until fn returns false.
func elements(arr string, fn func(val string) bool) {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	i++
	for {
		i = skipSpace(arr, i)
		if i >= len(arr) || arr[i] == ']' {
			return
		}
		end := skipValue(arr, i)
		if end < 0 || !fn(arr[i:end]) {
			return
		}
		i = skipSpace(arr, end)
		if i >= len(arr) || arr[i] != ',' {
			return
		}
		i++
	}
}

// member is the raw value of obj's member key, or "".
func member(obj, key string) string {
	var out string
	fields(obj, func(k, v string) bool {
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
		i := skipSpace(v, 1)
		return i < len(v) && v[i] != ']' && v[i] != '}'
	case 'n', 'f':
		return false
	}
	return true
}

func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at s[i] == '"', or -1.
func skipString(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index just past the value starting at s[i], or -1.
func skipValue(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	switch s[i] {
	case '"':
		return skipString(s, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"':
				end := skipString(s, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(s) && s[j] != ',' && s[j] != '}' && s[j] != ']' && !isSpace(s[j]) {
		j++
	}
	if j == i {
		return -1
	}
	return j
}
