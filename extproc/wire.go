package extproc

import "google.golang.org/protobuf/encoding/protowire"

// Protobuf wire helpers shared by the hand-written encoders (statecodec.go, codec.go).

// Implicit presence: a zero value is not written.

func appendString(b []byte, n protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendVarint(b []byte, n protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, n, protowire.VarintType), v)
}

func appendBool(b []byte, n protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, n, protowire.VarintType), 1)
}

func appendFixed64(b []byte, n protowire.Number, v int64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed64(protowire.AppendTag(b, n, protowire.Fixed64Type), uint64(v))
}

// beginMessage writes a nested message's tag and a one-byte length placeholder, and returns
// where the placeholder is: most of the state's messages are under 128 bytes, so sizing
// them first (a second walk) would cost more than the rare move endMessage makes.
func beginMessage(b []byte, n protowire.Number) ([]byte, int) {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	at := len(b)
	return append(b, 0), at
}

// endMessage fills in the length of the message written after the placeholder at at.
func endMessage(b []byte, at int) []byte {
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	k := protowire.SizeVarint(uint64(n))
	var pad [9]byte
	b = append(b, pad[:k-1]...)
	copy(b[at+k:], b[at+1:at+1+n])
	protowire.AppendVarint(b[at:at], uint64(n))
	return b
}
