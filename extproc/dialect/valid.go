package dialect

import (
	"encoding/binary"
	"math/bits"

	"github.com/switchyard-gw/switchyard/internal/rawjson"
)

// validJSON reports whether body is one JSON value with optional whitespace around it,
// giving gjson.ValidBytes's answer on every input (FuzzValidJSON checks it) but reading
// string contents in 8-byte words: most of a prompt body is long strings, and gjson's
// validstring tests them byte by byte.
//
// The grammar is gjson's (validpayload, validany, validobject, validarray, validcomma,
// validcolon, validstring, validnumber, validtrue/false/null): RFC 8259's, with
// whitespace exactly " \t\n\r", no byte order mark, and string bytes >= 0x80 taken as
// they come, without a UTF-8 check (nor a surrogate check on \u escapes).
//
// gjson recurses once per level of nesting with no bound of its own, only the goroutine
// stack's (about ten million '[' overflow its default 1 GB, fatally). This walk is
// iterative, with the open containers kept on a bit stack: gjson's answer at any depth
// gjson survives, and an answer beyond.
func validJSON(body []byte) bool {
	var (
		i     int
		ok    bool
		depth int // open containers
		// bit k of stack: the container open at depth k+1 is an object (not an
		// array). The first 256 levels need no allocation.
		buf   [4]uint64
		stack = buf[:]
	)
	push := func(object bool) {
		w := depth >> 6
		if w == len(stack) {
			stack = append(stack, 0)
		}
		bit := uint64(1) << (depth & 63)
		if object {
			stack[w] |= bit
		} else {
			stack[w] &^= bit
		}
		depth++
	}

value: // validany: a value is due at i, after optional whitespace
	i = skipSpace(body, i)
	if i == len(body) {
		return false // also the empty and all-whitespace bodies (validpayload)
	}
	switch body[i] {
	case '{':
		i = skipSpace(body, i+1)
		if i < len(body) && body[i] == '}' {
			i++
			goto after
		}
		push(true)
		goto member
	case '[':
		i = skipSpace(body, i+1)
		if i < len(body) && body[i] == ']' {
			i++
			goto after
		}
		push(false)
		goto value // validarray hands any other byte to validany
	case '"':
		if i, ok = validString(body, i+1); !ok {
			return false
		}
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if i, ok = validNumber(body, i); !ok {
			return false
		}
	case 't':
		if i, ok = literal(body, i, "true"); !ok {
			return false
		}
	case 'f':
		if i, ok = literal(body, i, "false"); !ok {
			return false
		}
	case 'n':
		if i, ok = literal(body, i, "null"); !ok {
			return false
		}
	default:
		return false
	}

after: // a value ended at i
	i = skipSpace(body, i)
	if depth == 0 {
		return i == len(body) // validpayload: only whitespace after the top-level value
	}
	if i == len(body) {
		return false
	}
	if stack[(depth-1)>>6]>>((depth-1)&63)&1 == 1 { // validcomma(…, '}')
		switch body[i] {
		case ',':
			i = skipSpace(body, i+1)
			goto member
		case '}':
			depth--
			i++
			goto after
		}
		return false
	}
	switch body[i] { // validcomma(…, ']')
	case ',':
		i++
		goto value
	case ']':
		depth--
		i++
		goto after
	}
	return false

member: // validobject: a key is due at i (whitespace already skipped), then ':' and a value
	if i == len(body) || body[i] != '"' {
		return false
	}
	if i, ok = validString(body, i+1); !ok {
		return false
	}
	i = skipSpace(body, i) // validcolon
	if i == len(body) || body[i] != ':' {
		return false
	}
	i++
	goto value
}

// skipSpace returns the index of the first byte at or after i that is not JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && rawjson.IsSpace(b[i]) {
		i++
	}
	return i
}

// validString checks the rest of a string whose opening quote is before b[i] (gjson's
// validstring) and returns the index after its closing quote.
func validString(b []byte, i int) (int, bool) {
	for {
		i = stringStop(b, i)
		if i == len(b) {
			return i, false
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false // raw control byte
		}
		// a backslash: \" \\ \/ \b \f \n \r \t, or \u and 4 hex digits
		i++
		if i == len(b) {
			return i, false
		}
		switch b[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i++
		case 'u':
			if i+5 > len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
				return i, false
			}
			i += 5
		default:
			return i, false
		}
	}
}

const (
	lanes01     = 0x0101010101010101
	lanes80     = 0x8080808080808080
	quotes      = '"' * lanes01
	backslashes = '\\' * lanes01
)

// stringStop returns the index of the first byte at or after i that a string cannot take
// as it is (a control byte, '"' or '\\'), or len(b).
func stringStop(b []byte, i int) int {
	rest := b[i:]
	// Two words a round: one branch for 16 bytes of a long string.
	for len(rest) >= 16 {
		m0, m1 := stops(binary.LittleEndian.Uint64(rest)), stops(binary.LittleEndian.Uint64(rest[8:]))
		if m0|m1 != 0 {
			if m0 != 0 {
				return len(b) - len(rest) + bits.TrailingZeros64(m0)>>3
			}
			return len(b) - len(rest) + 8 + bits.TrailingZeros64(m1)>>3
		}
		rest = rest[16:]
	}
	if len(rest) >= 8 {
		if m := stops(binary.LittleEndian.Uint64(rest)); m != 0 {
			return len(b) - len(rest) + bits.TrailingZeros64(m)>>3
		}
		rest = rest[8:]
	}
	for j, c := range rest {
		if c < 0x20 || c == '"' || c == '\\' {
			return len(b) - len(rest) + j
		}
	}
	return len(b)
}

// stops flags, with its high bit, the first byte of w (in little-endian order) that is
// < 0x20, '"' or '\\': the classic "has less than" and "has zero byte" tests, with '"' and
// '\\' xored to zero. Each test wants the byte's high bit clear (a byte >= 0x80 is
// ordinary). Borrows can flag bytes after a true one, never before it, so the lowest flag
// is exact.
func stops(w uint64) uint64 {
	return ((w - 0x20*lanes01) | ((w ^ quotes) - lanes01) | ((w ^ backslashes) - lanes01)) &^ w & lanes80
}

// validNumber checks the number starting at b[i] ('-' or a digit; gjson's validnumber) and
// returns the index after it: an optional '-', 0 or digits not starting with 0, then
// optionally '.' and digits, then optionally e or E, an optional sign and digits. A
// leading 0 ends the integer part, so 01 is 0 followed by a stray 1, which the caller
// refuses.
func validNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	if i == len(b) || !isDigit(b[i]) {
		return i, false
	}
	if b[i] == '0' {
		i++
	} else {
		i = skipDigits(b, i)
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i == len(b) || !isDigit(b[i]) {
			return i, false
		}
		i = skipDigits(b, i)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i == len(b) || !isDigit(b[i]) {
			return i, false
		}
		i = skipDigits(b, i)
	}
	return i, true
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

// literal checks that b[i:] starts with word (true, false or null) and returns the index
// after it; like gjson's validtrue, what follows is the caller's to judge.
func literal(b []byte, i int, word string) (int, bool) {
	if len(b)-i < len(word) || string(b[i:i+len(word)]) != word {
		return i, false
	}
	return i + len(word), true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'f' }
