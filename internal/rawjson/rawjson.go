// Package rawjson owns the small scanner that reads raw JSON spans without decoding them:
// where a value starts and ends, and the members of an object or the elements of an array
// as raw text. The request parser (extproc/dialect) reads bodies that passed validation
// with it, and the stream parser (extproc/stream) reads every SSE event's data; neither
// needs gjson's decoding, which unescapes (and allocates for) every string it returns.
//
// On malformed input the functions return -1 or stop early; they never panic.
package rawjson

import "strings"

// IsSpace reports whether c is JSON whitespace.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// TrimSpace drops the JSON whitespace around b, without copying.
func TrimSpace(b []byte) []byte {
	for len(b) > 0 && IsSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && IsSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// SkipSpace returns the index of the first byte at or after i that is not whitespace.
func SkipSpace(s string, i int) int {
	for i < len(s) && IsSpace(s[i]) {
		i++
	}
	return i
}

// SkipString returns the index just past the string starting at s[i] ('"'), or -1 when it
// is not terminated. Strings are where the bytes are (text, base64), so it jumps from quote
// to quote: a quote ends the string unless an odd run of backslashes precedes it.
func SkipString(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		q := strings.IndexByte(s[j:], '"')
		if q < 0 {
			break
		}
		j += q
		k := j
		for k > i+1 && s[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j + 1
		}
	}
	return -1
}

// SkipValue returns the index just past the value starting at s[i], or -1.
func SkipValue(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	switch s[i] {
	case '"':
		return SkipString(s, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"':
				end := SkipString(s, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	// a number, true, false or null
	j := i
	for j < len(s) && s[j] != ',' && s[j] != '}' && s[j] != ']' && !IsSpace(s[j]) {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// Members calls fn with the raw key (without its quotes, escapes kept) and the raw value of
// each member of the object starting at s[i] ('{', after any whitespace), until fn returns
// false, and returns the index just past the object; -1 when it is malformed or fn stopped
// the walk.
func Members(s string, i int, fn func(key, val string) bool) int {
	i = SkipSpace(s, i)
	if i >= len(s) || s[i] != '{' {
		return -1
	}
	i = SkipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return -1
		}
		kEnd := SkipString(s, i)
		if kEnd < 0 {
			return -1
		}
		key := s[i+1 : kEnd-1]
		i = SkipSpace(s, kEnd)
		if i >= len(s) || s[i] != ':' {
			return -1
		}
		i = SkipSpace(s, i+1)
		vEnd := SkipValue(s, i)
		if vEnd < 0 || !fn(key, s[i:vEnd]) {
			return -1
		}
		i = SkipSpace(s, vEnd)
		if i < len(s) && s[i] == '}' {
			return i + 1
		}
		if i >= len(s) || s[i] != ',' {
			return -1
		}
		i = SkipSpace(s, i+1)
	}
}

// Elements calls fn with each raw element of the array starting at s[0] (after any
// whitespace), until fn returns false. Malformed input ends the walk early.
func Elements(s string, fn func(val string) bool) {
	i := SkipSpace(s, 0)
	if i >= len(s) || s[i] != '[' {
		return
	}
	i++
	for {
		i = SkipSpace(s, i)
		if i >= len(s) || s[i] == ']' {
			return
		}
		end := SkipValue(s, i)
		if end < 0 || !fn(s[i:end]) {
			return
		}
		i = SkipSpace(s, end)
		if i >= len(s) || s[i] != ',' {
			return
		}
		i++
	}
}
