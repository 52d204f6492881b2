package extproc

import "google.golang.org/protobuf/encoding/protowire"

// Protobuf wire helpers shared by the hand-written encoders (statecodec.go, codec.go).

// appendUvarint is protowire.AppendVarint with the one-byte case inline: nearly every tag,
// length and enum the encoders write is under 0x80, and protowire's is not inlined.
func appendUvarint(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	return protowire.AppendVarint(b, v)
}

func appendTag(b []byte, n protowire.Number, t protowire.Type) []byte {
	return appendUvarint(b, uint64(n)<<3|uint64(t))
}

// appendBytesField writes a bytes or string field, present even when empty.
func appendBytesField[T string | []byte](b []byte, n protowire.Number, v T) []byte {
	b = appendUvarint(appendTag(b, n, protowire.BytesType), uint64(len(v)))
	return append(b, v...)
}

// Implicit presence: a zero value is not written.

func appendString(b []byte, n protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return appendBytesField(b, n, s)
}

func appendVarint(b []byte, n protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return appendUvarint(appendTag(b, n, protowire.VarintType), v)
}

func appendBool(b []byte, n protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	return append(appendTag(b, n, protowire.VarintType), 1)
}

func appendFixed64(b []byte, n protowire.Number, v int64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed64(appendTag(b, n, protowire.Fixed64Type), uint64(v))
}

// beginMessage writes a nested message's tag and a one-byte length placeholder, and returns
// where the placeholder is: most of the state's messages are under 128 bytes, so sizing
// them first (a second walk) would cost more than the rare move endMessage makes.
func beginMessage(b []byte, n protowire.Number) ([]byte, int) {
	b = appendTag(b, n, protowire.BytesType)
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
