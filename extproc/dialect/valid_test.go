package dialect

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// validJSON must give gjson.ValidBytes's answer on every input: Parse used gjson's, and
// the member scan after it relies on what passed.

func checkValid(t *testing.T, b []byte) {
	t.Helper()
	if got, want := validJSON(b), gjson.ValidBytes(b); got != want {
		t.Errorf("validJSON(%q) = %v, gjson.ValidBytes = %v", b, got, want)
	}
}

// validCases are edge cases of each rule of gjson's grammar; want is gjson's answer,
// checked too, so that a change of gjson's grammar shows here rather than as a silent
// difference.
var validCases = []struct {
	in   string
	want bool
}{
	// validpayload: one value, only whitespace around it
	{"", false},
	{" ", false},
	{" \t\r\n", false},
	{"1", true},
	{" 1 ", true},
	{"\t\r\n1\t\r\n", true},
	{"1 2", false},
	{"{} {}", false},
	{"{}x", false},
	{"{},", false},
	{"[]]", false},
	{"{}}", false},
	{"\"a\"\"", false},
	{"1\x00", false},
	{"\x00", false},
	{"\f1", false}, // only " \t\n\r" is whitespace
	{"1\v", false},
	{"\u00a01", false},
	{"\xef\xbb\xbf{}", false}, // byte order mark
	{"\xef\xbb\xbf", false},
	// validany
	{"x", false},
	{"+1", false},
	{".5", false},
	{"'a'", false},
	{"}", false},
	{"]", false},
	{":", false},
	{",", false},
	// literals
	{"true", true},
	{"false", true},
	{"null", true},
	{"tru", false},
	{"t", false},
	{"fals", false},
	{"nul", false},
	{"True", false},
	{"NULL", false},
	{"truex", false},
	{"true1", false},
	{"nulll", false},
	{"[true,false,null]", true},
	{"[truefalse]", false},
	{"{\"a\":nul}", false},
	{"{\"a\":true}", true},
	// numbers (validnumber)
	{"0", true},
	{"-0", true},
	{"-", false},
	{"--1", false},
	{"-a", false},
	{"- 1", false},
	{"01", false},
	{"-01", false},
	{"00", false},
	{"10", true},
	{"1234567890", true},
	{"1.", false},
	{"1.5", true},
	{"0.0", true},
	{"-0.5", true},
	{"1.a", false},
	{"1..5", false},
	{"1.5.5", false},
	{"1e", false},
	{"1e5", true},
	{"1E5", true},
	{"1e+5", true},
	{"1e-5", true},
	{"1e+", false},
	{"1e-", false},
	{"1e+-5", false},
	{"1ee5", false},
	{"1.e5", false},
	{"1.5e5", true},
	{"1.5E-05", true},
	{"0e0", true},
	{"-0e-0", true},
	{"1e5.5", false},
	{"1x", false},
	{"0x10", false},
	{"Infinity", false},
	{"NaN", false},
	{"[1,-]", false},
	{"[-0,0,1e1,1.0e-1]", true},
	{"[01]", false},
	{"[1.]", false},
	{"{\"a\":1e}", false},
	{"{\"a\":-}", false},
	{"{\"a\":1.5e+3}", true},
	// strings (validstring)
	{`""`, true},
	{`"`, false},
	{`"a`, false},
	{`"abc`, false},
	{`"\`, false},
	{`"\"`, false},
	{`"\""`, true},
	{`"\\"`, true},
	{`"\\\"`, false},
	{`"\/"`, true},
	{`"\b\f\n\r\t"`, true},
	{`"\"\\\/\b\f\n\r\t\u0000"`, true},
	{`"\a"`, false},
	{`"\v"`, false},
	{`"\0"`, false},
	{`"\x41"`, false},
	{`"\'"`, false},
	{`"\U0041"`, false},
	{`"\N"`, false},
	{"\"\\\x00\"", false},
	{"\"\\\xc3\xa9\"", false},
	{`"\u0041"`, true},
	{`"\uABCD"`, true},
	{`"\uabcd"`, true},
	{`"\uFfFf"`, true},
	{`"\u12"`, false},
	{`"\u123"`, false},
	{`"\u"`, false},
	{`"\u12345"`, true},
	{`"\u12G4"`, false},
	{`"\ug000"`, false},
	{`"\u00@0"`, false},
	{`"\u00` + "`" + `0"`, false},
	{`"\u00[0"`, false},
	{`"\u00{0"`, false},
	{`"\u00/0"`, false},
	{`"\u00:0"`, false},
	{`"\u`, false},
	{`"\u1`, false},
	{`"\u123`, false},
	{`"\u1234`, false},
	{`"\uD800"`, true}, // lone surrogates: gjson does not pair them
	{`"\uDC00\uD800"`, true},
	{"\"\x00\"", false},
	{"\"\x01\"", false},
	{"\"\t\"", false},
	{"\"\n\"", false},
	{"\"\x1f\"", false},
	{"\"\x1fn\"", false},
	{"\" \"", true},
	{"\"\x7f\"", true},
	{"\"\x80\"", true}, // no UTF-8 check
	{"\"\xff\"", true},
	{"\"\xc3\"", true},
	{"\"\xed\xa0\x80\"", true},
	{"\"\xc3\xa9\"", true},
	{"\"\xf0\x9f\x98\x80\"", true},
	{"\"\xa2\xdc\x9f\xa0\"", true}, // 0x22, 0x5c, 0x1f, 0x20 with the high bit set
	{"\xc3\xa9", false},
	{"[\xff]", false},
	// objects (validobject, validcolon, validcomma)
	{"{}", true},
	{"{ }", true},
	{"{\t\r\n}", true},
	{"{", false},
	{"{ ", false},
	{`{"a"`, false},
	{`{"a"}`, false},
	{`{"a":}`, false},
	{`{"a":1`, false},
	{`{"a":1 `, false},
	{`{"a":1,`, false},
	{`{"a":1,}`, false},
	{`{"a":1,"b"}`, false},
	{`{"a":1,"b":2}`, true},
	{` { "a" : 1 , "b" : [ ] } `, true},
	{`{"a" 1}`, false},
	{`{"a"::1}`, false},
	{`{"a":1 "b":2}`, false},
	{`{"a":1,,"b":2}`, false},
	{`{,}`, false},
	{`{,"a":1}`, false},
	{`{a:1}`, false},
	{`{'a':1}`, false},
	{`{1:1}`, false},
	{`{"a":1]`, false},
	{`{"a":1}]`, false},
	{`{"a":{"b":{}}}`, true},
	{`{"a":"b"}`, true},
	{`{"a":"b}`, false},
	{`{"\u0061":1}`, true},
	{`{"\x":1}`, false},
	{"{\"\x01\":1}", false},
	{`{"":1}`, true},
	{`{"a":1,"a":2}`, true}, // duplicates are Parse's business
	// arrays (validarray)
	{"[]", true},
	{"[ ]", true},
	{"[", false},
	{"[ ", false},
	{"[1", false},
	{"[1,", false},
	{"[1,]", false},
	{"[,1]", false},
	{"[,]", false},
	{"[1,,2]", false},
	{"[1 2]", false},
	{"[1,2]", true},
	{" [ 1 , 2 ] ", true},
	{"[}", false},
	{"[1}", false},
	{"[[]", false},
	{"[[]]", true},
	{"[[],[[]],{}]", true},
	{"[{}", false},
	{"[{]}", false},
	{`["a":1]`, false},
	{`[{"a":[1,{"b":null}]}]`, true},
}

func TestValidJSONCases(t *testing.T) {
	for _, c := range validCases {
		if got := gjson.ValidBytes([]byte(c.in)); got != c.want {
			t.Errorf("gjson.ValidBytes(%q) = %v, the table says %v", c.in, got, c.want)
		}
		checkValid(t, []byte(c.in))
	}
}

// TestValidJSONStringLanes puts each byte value at each position of strings of every
// length up to 26, so that it lands in each lane of stringStop's 8-byte words and in its
// byte-at-a-time tail, among ordinary or high bytes.
func TestValidJSONStringLanes(t *testing.T) {
	fills := []byte{'a', ' ', 0x7f, 0x80, 0xa2, 0xff}
	for _, fill := range fills {
		for n := 0; n <= 26; n++ {
			for pos := 0; pos < n; pos++ {
				for v := 0; v < 256; v++ {
					s := bytes.Repeat([]byte{fill}, n)
					s[pos] = byte(v)
					for _, wrap := range [][2]string{{`"`, `"`}, {`{"k":"`, `"}`}, {`["`, `",1]`}, {`"`, ``}} {
						b := append(append([]byte(wrap[0]), s...), wrap[1]...)
						checkValid(t, b)
					}
				}
			}
		}
	}
	// escapes, good and bad, at every position and cut at every length
	for _, esc := range []string{`\"`, `\\`, `\/`, `\b`, `\n`, `\u00e9`, `\uD83D\uDE00`, `\x`, `\u12`, `\`, `\u12g4`} {
		for n := 0; n <= 24; n++ {
			for pos := 0; pos <= n; pos++ {
				s := strings.Repeat("b", pos) + esc + strings.Repeat("b", n-pos)
				body := []byte(`"` + s + `"`)
				for cut := 0; cut <= len(body); cut++ {
					checkValid(t, body[:cut])
				}
			}
		}
	}
}

// TestStringStop checks the SWAR scan against a byte loop, with two stops in one word so
// that a flag propagated by a borrow cannot pass for the first stop.
func TestStringStop(t *testing.T) {
	naive := func(b []byte) int {
		for i, c := range b {
			if c < 0x20 || c == '"' || c == '\\' {
				return i
			}
		}
		return len(b)
	}
	vals := []byte{0, 0x01, 0x1f, 0x20, 0x21, '"', '#', '\\', ']', 0x5b, 0x7f, 0x80, 0x9f, 0xa0, 0xa1, 0xa2, 0xdc, 0xdd, 0xff}
	b := make([]byte, 27) // a 16-byte round, an 8-byte word and the tail
	for _, fill := range []byte{'a', 0x21, 0x80, 0xff} {
		for p := range 25 {
			for q := p; q < 25; q++ {
				for _, u := range vals {
					for _, v := range vals {
						for k := range b {
							b[k] = fill
						}
						b[p], b[q] = u, v
						for i := range 3 {
							if got, want := stringStop(b, i), i+naive(b[i:]); got != want {
								t.Fatalf("stringStop(%q, %d) = %d, want %d", b, i, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// TestValidJSONShort tries every input of one and two bytes, and every three-byte input
// over bytes that matter to the grammar.
func TestValidJSONShort(t *testing.T) {
	for a := range 256 {
		checkValid(t, []byte{byte(a)})
		for b := range 256 {
			checkValid(t, []byte{byte(a), byte(b)})
		}
	}
	alpha := []byte(" \t\n\r\x00\x01\x1f\x80\xff\"\\/{}[]:,-+.0159eEtuabfnrlsxABF")
	for _, a := range alpha {
		for _, b := range alpha {
			for _, c := range alpha {
				checkValid(t, []byte{a, b, c})
				checkValid(t, []byte{'"', a, b, c})
				checkValid(t, []byte{'[', a, b, c})
				checkValid(t, []byte{'{', '"', '"', a, b, c})
			}
		}
	}
}

// TestValidJSONDeep crosses the bit stack's first 256 levels, closing with the right and
// the wrong bracket at each depth.
func TestValidJSONDeep(t *testing.T) {
	for _, depth := range []int{1, 2, 63, 64, 65, 255, 256, 257, 300, 1000, 100000} {
		var open, shut strings.Builder
		for d := range depth {
			if d%3 == 1 {
				open.WriteString(`{"k":`)
			} else {
				open.WriteString("[")
			}
		}
		for d := depth - 1; d >= 0; d-- {
			if d%3 == 1 {
				shut.WriteString("}")
			} else {
				shut.WriteString("]")
			}
		}
		o, s := open.String(), shut.String()
		for _, b := range []string{o + s, o + "1" + s, o + s + " ", o + "1" + s[1:], o + "1" + s[:len(s)-1], o + "1" + s + "]", o + "[]" + s, o + "1," + s, o} {
			checkValid(t, []byte(b))
		}
		if depth > 1000 {
			continue
		}
		// swap each closing bracket for the other kind in turn
		for k := range len(s) {
			w := []byte(o + "1" + s)
			j := len(o) + 1 + k
			if w[j] == '}' {
				w[j] = ']'
			} else {
				w[j] = '}'
			}
			checkValid(t, w)
		}
	}
}

func TestValidJSONBodies(t *testing.T) {
	for _, f := range []string{"chat4k", "plain4k", "image4k"} {
		body, err := os.ReadFile("testdata/" + f + ".json")
		if err != nil {
			t.Fatal(err)
		}
		if !validJSON(body) {
			t.Errorf("%s: not valid", f)
		}
		// every cut and a stray byte at every position
		for i := range len(body) + 1 {
			checkValid(t, body[:i])
			for _, c := range []byte{'"', '\\', '\n', 0x00, ',', '}', 0xff} {
				b := bytes.Clone(body)
				if i < len(b) {
					b[i] = c
				}
				checkValid(t, b)
			}
		}
	}
}

// FuzzValidJSON: seed corpus in testdata/fuzz/FuzzValidJSON/ (the testdata bodies, valid
// and broken snippets and any divergence found).
func FuzzValidJSON(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		orig := bytes.Clone(b)
		checkValid(t, b)
		if !bytes.Equal(b, orig) {
			t.Fatal("validJSON changed its input")
		}
	})
}

func BenchmarkValidJSON(b *testing.B) {
	impls := []struct {
		name  string
		valid func([]byte) bool
	}{{"validJSON", validJSON}, {"gjson", gjson.ValidBytes}}
	for _, impl := range impls {
		b.Run(impl.name, func(b *testing.B) {
			for _, f := range []string{"chat4k", "plain4k", "image4k"} {
				body, err := os.ReadFile("testdata/" + f + ".json")
				if err != nil {
					b.Fatal(err)
				}
				b.Run(f, func(b *testing.B) {
					b.SetBytes(int64(len(body)))
					b.ReportAllocs()
					for b.Loop() {
						if !impl.valid(body) {
							b.Fatal("not valid")
						}
					}
				})
			}
		})
	}
}
