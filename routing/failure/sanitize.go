package failure

import (
	"strings"
	"unicode/utf8"
)

const (
	// MaxMessageBytes bounds a sanitised message. Provider messages are a sentence or two;
	// anything longer is a stack trace or an echoed input nobody should relay.
	MaxMessageBytes = 1024
	redacted        = "[REDACTED]"
)

// Sanitize returns msg fit to relay to a client or a log: credentials redacted, control
// characters and invalid UTF-8 replaced by spaces, surrounding space trimmed, and at most
// MaxMessageBytes long, cut on a rune and word boundary. It is idempotent, and a message that
// needs nothing is returned as is, without allocating.
//
// Redacted, as "[REDACTED]":
//   - API keys by shape: "sk-"/"sk_" (OpenAI "sk-proj-…", Anthropic "sk-ant-…", OpenRouter
//     "sk-or-…"), Google "AIza…", JWTs "eyJ…" (Entra ID bearer tokens for Azure,
//     docs/wire-formats.md §4.1);
//   - key fragments that providers echo masked, e.g. OpenAI's 401 "Incorrect API key provided:
//     sk-abc12*****xyz9" (docs/wire-formats.md §1.4): any word containing "***";
//   - Azure keys: 32 or more hex digits (the api-key of §4.1), and other long opaque tokens: 40 or
//     more letters and digits with hardly any separators (Azure's newer 84-character keys,
//     Groq "gsk_…"). Request IDs ("req_…", UUIDs) and model names stay: they have separators
//     or are short, and they are what an operator needs;
//   - the value after "Bearer ", after a key-like name and "=" (…key=, …token=, secret=,
//     password=, sig= of a query string), and after "api-key:", "subscription-key:",
//     "password:" or "secret:" (a header echoed into a message); after "Authorization:" the
//     scheme and its credentials.
func Sanitize(msg string) string {
	z := sanitizer{s: msg}
	prevStart, prevEnd := 0, -1 // the previous word, for the context rules; none yet
	i := 0
	for i < len(msg) && z.outLen(i) <= MaxMessageBytes {
		c := msg[i]
		switch {
		case isWordByte(c):
			j := i + 1
			for j < len(msg) && isWordByte(msg[j]) {
				j++
			}
			if prevEnd >= 0 && secretFollows(msg[prevStart:prevEnd], msg[prevEnd:i]) {
				j = credentialEnd(msg, i, msg[prevStart:prevEnd])
				z.replace(i, j, redacted)
			} else if a, b := trimDots(msg, i, j); a < b && secretWord(msg[a:b]) {
				z.replace(a, b, redacted)
			}
			prevStart, prevEnd = i, j
			i = j
		case c < utf8.RuneSelf:
			if c < 0x20 || c == 0x7f {
				z.replace(i, i+1, " ")
			}
			i++
		default:
			r, n := utf8.DecodeRuneInString(msg[i:])
			if isControlOrInvalid(r, n) {
				z.replace(i, i+n, " ")
			}
			i += n
		}
	}
	out := z.finish(i)
	if len(out) > MaxMessageBytes {
		out = truncate(out)
	}
	return strings.TrimSpace(out)
}

// sanitizer copies msg lazily: only a message that changes is built anew.
type sanitizer struct {
	s       string
	b       strings.Builder
	last    int // s[last:] is not yet copied to b
	changed bool
}

func (z *sanitizer) replace(from, to int, with string) {
	if !z.changed {
		z.changed = true
		z.b.Grow(min(len(z.s), MaxMessageBytes) + len(redacted))
	}
	z.b.WriteString(z.s[z.last:from])
	z.b.WriteString(with)
	z.last = to
}

// outLen is the output's length once s[:i] is processed.
func (z *sanitizer) outLen(i int) int {
	if !z.changed {
		return i
	}
	return z.b.Len() + i - z.last
}

func (z *sanitizer) finish(i int) string {
	if !z.changed {
		return z.s[:i]
	}
	z.b.WriteString(z.s[z.last:i])
	return z.b.String()
}

// truncate cuts s to MaxMessageBytes on a rune boundary, and drops a word the cut would split:
// a word's prefix can look like a key where the whole word did not (a long token whose "." lay
// past the cut), which would break idempotence.
func truncate(s string) string {
	cut := MaxMessageBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if isWordByte(s[cut]) {
		for cut > 0 && isWordByte(s[cut-1]) {
			cut--
		}
	}
	return s[:cut]
}

// isWordByte: the characters of keys, tokens and masked fragments as they appear in text.
// "/", "+" and "=" (base64) are left out so that URLs and key=value pairs split into words;
// the context rules redact a whole value including them (valueEnd).
func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == '*'
}

// trimDots narrows s[i:j] to exclude leading and trailing dots ("…sk-abc." ends a sentence).
func trimDots(s string, i, j int) (int, int) {
	for i < j && s[i] == '.' {
		i++
	}
	for j > i && s[j-1] == '.' {
		j--
	}
	return i, j
}

// secretWord reports a word that is a credential by its shape alone.
func secretWord(w string) bool {
	switch {
	case len(w) >= 8 && (strings.HasPrefix(w, "sk-") || strings.HasPrefix(w, "sk_")):
		return true
	case len(w) >= 30 && strings.HasPrefix(w, "AIza"):
		return true
	case len(w) >= 20 && strings.HasPrefix(w, "eyJ"):
		return true
	case len(w) >= 6 && strings.Contains(w, "***"):
		return true
	case len(w) >= 32 && isHex(w):
		return true
	case len(w) >= 40 && isOpaque(w):
		return true
	}
	return false
}

func isHex(w string) bool {
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// isOpaque: letters and digits, both present, with at most one "-" or "_" per ten characters
// (a slug such as a long deployment name has more) and no "." or "*".
func isOpaque(w string) bool {
	letters, digits, seps := 0, 0, 0
	for i := 0; i < len(w); i++ {
		switch c := w[i]; {
		case '0' <= c && c <= '9':
			digits++
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			letters++
		case c == '-' || c == '_':
			seps++
		default:
			return false
		}
	}
	return letters > 0 && digits > 0 && seps*10 <= len(w)
}

// secretFollows reports whether the word after prev, separated by sep, is a credential by
// context: "Bearer <token>", "<…key>=<value>", "api-key: <value>".
func secretFollows(prev, sep string) bool {
	op, ok := separator(sep)
	if !ok {
		return false
	}
	switch op {
	case ' ':
		return equalFold(prev, "bearer")
	case '=':
		return hasSuffixFold(prev, "key") || hasSuffixFold(prev, "token") ||
			hasSuffixFold(prev, "secret") || hasSuffixFold(prev, "password") ||
			hasSuffixFold(prev, "sig") || hasSuffixFold(prev, "signature")
	default: // ':'
		return hasSuffixFold(prev, "api-key") || hasSuffixFold(prev, "api_key") ||
			hasSuffixFold(prev, "apikey") || hasSuffixFold(prev, "subscription-key") ||
			hasSuffixFold(prev, "authorization") || hasSuffixFold(prev, "password") ||
			hasSuffixFold(prev, "secret")
	}
}

// separator classifies the text between two words: ' ' when it is only white space (as it
// will be output: control characters count as spaces), '=' or ':' when that is its one
// non-space, non-quote character, ok false otherwise.
func separator(sep string) (op byte, ok bool) {
	switch sep {
	case "":
		return 0, false
	case " ":
		return ' ', true // the common case, without decoding
	}
	op = ' '
	quotes := false
	for i := 0; i < len(sep); {
		r, n := utf8.DecodeRuneInString(sep[i:])
		i += n
		switch {
		case r == ' ' || isControlOrInvalid(r, n):
		case r == '"' || r == '\'' || r == '`':
			quotes = true
		case (r == '=' || r == ':') && op == ' ':
			op = byte(r)
		default:
			return 0, false
		}
	}
	if op == ' ' && quotes {
		return 0, false
	}
	return op, true
}

// credentialEnd is the end of the credential that starts at i after prev: one value, or for
// an echoed Authorization header its scheme and credentials ("Basic dXNlcjpwYXNz").
func credentialEnd(s string, i int, prev string) int {
	j := valueEnd(s, i)
	if !hasSuffixFold(prev, "authorization") {
		return j
	}
	switch v := s[i:j]; {
	case equalFold(v, "basic"), equalFold(v, "bearer"), equalFold(v, "digest"), equalFold(v, "sharedkey"):
		k := j
		for k < len(s) && s[k] == ' ' {
			k++
		}
		if k > j && k < len(s) && isWordByte(s[k]) {
			return valueEnd(s, k)
		}
	}
	return j
}

// valueEnd is the end of a credential value starting at i: up to white space, a control
// character, a quote or bracket, or a separator of a query string or list.
func valueEnd(s string, i int) int {
	for i < len(s) {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"'`,;&<>()[]{}|\\", c) >= 0 {
			break
		}
		i++
	}
	return i
}

// isControlOrInvalid: C0, DEL and C1 control characters and invalid UTF-8, all output as a
// space.
func isControlOrInvalid(r rune, size int) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || (r == utf8.RuneError && size == 1)
}
