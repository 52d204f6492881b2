package extproc

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

// checkBase64URL fails unless base64URL agrees with encoding/base64.RawURLEncoding on src as
// bytes to encode and as text to decode: the same text, the same bytes written, the same count
// and the same error (offsets included).
func checkBase64URL(t testing.TB, e *base64URL, src []byte) {
	t.Helper()
	want := b64.EncodeToString(src)
	got := make([]byte, b64.EncodedLen(len(src)))
	e.encode(got, src)
	if string(got) != want {
		t.Fatalf("encode(%x) = %q, want %q", src, got, want)
	}
	text := string(src)
	wantDst := make([]byte, b64.DecodedLen(len(text)))
	wantN, wantErr := b64.Decode(wantDst, src)
	gotDst := make([]byte, len(wantDst))
	gotN, gotErr := e.decode(gotDst, text)
	if gotN != wantN || !bytes.Equal(gotDst[:gotN], wantDst[:wantN]) || !sameError(gotErr, wantErr) {
		t.Fatalf("decode(%q) = %d %x %v, want %d %x %v", text, gotN, gotDst[:gotN], gotErr, wantN, wantDst[:wantN], wantErr)
	}
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error()
}

func TestBase64URLEncodesAndDecodesLikeRawURLEncoding(t *testing.T) {
	e := newBase64URL()
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 300 {
		for range 20 {
			src := make([]byte, n)
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			checkBase64URL(t, e, src)
			// Its encoding decodes back (the decoder's fast path), at every length.
			text := b64.EncodeToString(src)
			checkBase64URL(t, e, []byte(text))
			dst := make([]byte, b64.DecodedLen(len(text)))
			if m, err := e.decode(dst, text); err != nil || !bytes.Equal(dst[:m], src) {
				t.Fatalf("decode(encode(%x)) = %x, %v", src, dst[:m], err)
			}
		}
	}
}

// Every byte value at every position of valid texts of several lengths: a character outside
// the alphabet (padding, the standard alphabet's + and /, line breaks, which the standard
// library skips, non-ASCII) is found where the standard library finds it, in the fast loop
// and in the tail.
func TestBase64URLDecodeRejectsLikeRawURLEncoding(t *testing.T) {
	e := newBase64URL()
	for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 23, 24, 25, 40} {
		valid := []byte(base64URLAlphabet[:n])
		for at := range n {
			for c := range 256 {
				text := bytes.Clone(valid)
				text[at] = byte(c)
				checkBase64URL(t, e, text)
			}
		}
	}
	// Two line breaks, in the fast loop's range and after it.
	checkBase64URL(t, e, []byte("QUJD\nREVGR0hJ\r\nSktMTU5PUFFSU1RVVldY"))
	if _, err := e.decode(make([]byte, 8), "QUJDREVG="); err == nil {
		t.Error("padding accepted")
	} else if _, ok := err.(base64.CorruptInputError); !ok {
		t.Errorf("error %T, want base64.CorruptInputError", err)
	}
}

func FuzzBase64URL(f *testing.F) {
	e := newBase64URL()
	f.Add([]byte("QUJDREVGR0hJSktMTU5PUFFSU1RVVldY"))
	f.Add([]byte("QUJD\nREVGR0hJ"))
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0xff})
	f.Fuzz(func(t *testing.T, src []byte) { checkBase64URL(t, e, src) })
}

func BenchmarkBase64URL(b *testing.B) {
	e := newBase64URL()
	src := make([]byte, 700) // a sealed state carrying three attempts
	for i := range src {
		src[i] = byte(i * 7)
	}
	text := b64.EncodeToString(src)
	dst := make([]byte, len(text))
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			e.encode(dst, src)
		}
	})
	b.Run("encode/stdlib", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			b64.Encode(dst, src)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if _, err := e.decode(dst, text); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/stdlib", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if _, err := b64.Decode(dst, []byte(text)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
