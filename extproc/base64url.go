package extproc

import (
	"encoding/base64"
	"encoding/binary"
)

// base64URL is unpadded base64url (encoding/base64.RawURLEncoding) with a faster main loop:
// the sealed state is encoded on every seal and decoded on every open, and the standard
// library's loop, three bytes and four table lookups at a time, cost as much as the state's
// codec and AES-GCM together. Here six bytes become eight characters with one 8-byte load,
// four lookups of two characters each and one 8-byte store; eight characters become six
// bytes with eight lookups and one store. Whatever the fast loop does not take (the last
// bytes, or anything from the first chunk it cannot decode) goes to the standard library, so
// results and errors are exactly RawURLEncoding's (base64url_test.go holds it to that).
type base64URL struct {
	// pairs[x] is the two characters of the 12 bits x, the first in the low byte.
	pairs [1 << 12]uint16
	// values[c] is the 6-bit value of the character c, or 0xff when c is not in the alphabet.
	values [256]byte
}

const base64URLAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

var b64 = base64.RawURLEncoding

func newBase64URL() *base64URL {
	e := &base64URL{}
	for x := range e.pairs {
		e.pairs[x] = uint16(base64URLAlphabet[x>>6]) | uint16(base64URLAlphabet[x&63])<<8
	}
	for c := range e.values {
		e.values[c] = 0xff
	}
	for v := range len(base64URLAlphabet) {
		e.values[base64URLAlphabet[v]] = byte(v)
	}
	return e
}

// encode writes src's encoding to dst, which holds b64.EncodedLen(len(src)) bytes.
func (e *base64URL) encode(dst, src []byte) {
	si, di := 0, 0
	// Eight bytes are loaded for the six taken, so the loop stops two bytes early.
	for ; len(src)-si >= 8 && len(dst)-di >= 8; si, di = si+6, di+8 {
		x := binary.BigEndian.Uint64(src[si:])
		binary.LittleEndian.PutUint64(dst[di:], uint64(e.pairs[x>>52])|
			uint64(e.pairs[x>>40&0xfff])<<16|
			uint64(e.pairs[x>>28&0xfff])<<32|
			uint64(e.pairs[x>>16&0xfff])<<48)
	}
	b64.Encode(dst[di:], src[si:])
}

// decode writes the decoding of src to dst, which holds b64.DecodedLen(len(src)) bytes, and
// returns how many bytes it wrote, with RawURLEncoding.Decode's result and error.
func (e *base64URL) decode(dst []byte, src string) (int, error) {
	si, di := 0, 0
	// Eight bytes are stored for the six written, so the loop stops two bytes early.
	for ; len(src)-si >= 8 && len(dst)-di >= 8; si, di = si+8, di+6 {
		s := src[si : si+8]
		a, b, c, d := e.values[s[0]], e.values[s[1]], e.values[s[2]], e.values[s[3]]
		f, g, h, i := e.values[s[4]], e.values[s[5]], e.values[s[6]], e.values[s[7]]
		if (a|b|c|d|f|g|h|i)&0xc0 != 0 {
			break // not in the alphabet (or a line break the standard library skips)
		}
		binary.BigEndian.PutUint64(dst[di:], uint64(a)<<58|uint64(b)<<52|uint64(c)<<46|uint64(d)<<40|
			uint64(f)<<34|uint64(g)<<28|uint64(h)<<22|uint64(i)<<16)
	}
	// From a chunk boundary, the standard library's decoding of the rest is its decoding of
	// the whole input's rest; only its error offsets need shifting.
	n, err := b64.Decode(dst[di:], []byte(src[si:]))
	if ce, ok := err.(base64.CorruptInputError); ok {
		err = ce + base64.CorruptInputError(si)
	}
	return di + n, err
}
