package extproc

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	statev1 "github.com/switchyard-gw/switchyard/proto/switchyard/state/v1"
)

// The state codec is held to protobuf-go: the same bytes as proto.Marshal, the same message
// as proto.Unmarshal.

// fillAll sets every field of m, found through its descriptor, to a value that is not the
// zero value and that needs more than one byte where the wire allows it, so that a field
// added to state.proto and not to the codec fails these tests.
func fillAll(m protoreflect.Message, seed int) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for j := range 2 {
				if fd.Kind() == protoreflect.MessageKind {
					e := l.NewElement()
					fillAll(e.Message(), seed*10+j)
					l.Append(e)
				} else {
					l.Append(scalarValue(fd, seed*10+j))
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			fillAll(m.Mutable(fd).Message(), seed+1)
		default:
			m.Set(fd, scalarValue(fd, seed))
		}
	}
}

func scalarValue(fd protoreflect.FieldDescriptor, seed int) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("%s-%d", fd.Name(), seed))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(fmt.Sprintf("%s=%d", fd.Name(), seed)))
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(vals.Len() - 1).Number())
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(-int32(fd.Number()) - int32(seed)) // ten bytes on the wire
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(-int64(fd.Number()) - int64(seed))
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(300 + uint32(seed))
	case protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(-1_234_567_890_123 - int64(seed))
	}
	panic(fmt.Sprintf("fillAll: field %s of kind %s: add it to scalarValue", fd.FullName(), fd.Kind()))
}

// everyFieldState is a state with every field of every message set.
func everyFieldState() *statev1.State {
	st := &statev1.State{}
	fillAll(st.ProtoReflect(), 1)
	return st
}

func protoBytes(t testing.TB, st *statev1.State) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStateCodecMatchesProtobuf(t *testing.T) {
	long := sampleState()
	long.Attempts[0].Message = strings.Repeat("a message over 127 bytes needs a longer length prefix. ", 6)
	long.ClientHeaders[0].Value = bytes.Repeat([]byte{'v'}, 20000) // a three-byte length
	withUnknown := sampleState()
	// Fields a newer replica might add, at every level: kept, and written back.
	unknown := protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 7)
	unknown = protowire.AppendString(protowire.AppendTag(unknown, 100, protowire.BytesType), "new")
	withUnknown.ProtoReflect().SetUnknown(unknown)
	withUnknown.Attempts[1].ProtoReflect().SetUnknown(unknown)
	withUnknown.ClientHeaders[2].ProtoReflect().SetUnknown(unknown)
	withUnknown.Skips[0].ProtoReflect().SetUnknown(unknown)
	withUnknown.Current.ProtoReflect().SetUnknown(unknown)
	firstPass := sampleState()
	firstPass.Attempts, firstPass.Skips, firstPass.Current = nil, nil, nil

	for name, st := range map[string]*statev1.State{
		"every field":    everyFieldState(),
		"sample":         sampleState(),
		"long fields":    long,
		"unknown fields": withUnknown,
		"no attempts":    firstPass,
		"empty":          {},
	} {
		t.Run(name, func(t *testing.T) {
			want := protoBytes(t, st)
			got := appendState(nil, st)
			if !bytes.Equal(got, want) {
				t.Fatalf("appendState differs from proto.Marshal:\n got %x\nwant %x", got, want)
			}
			// Appending keeps what the buffer held.
			prefixed := appendState([]byte("prefix"), st)
			if !bytes.Equal(prefixed[6:], want) || string(prefixed[:6]) != "prefix" {
				t.Fatal("appendState after a prefix differs")
			}
			back, err := decodeState(want)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(back, st) {
				t.Fatalf("decodeState(proto.Marshal(st)) differs from st:\n got %v\nwant %v", back, st)
			}
		})
	}
}

// TestDecodeStateSemantics: inputs proto.Marshal never writes but a decoder must read as
// proto.Unmarshal does.
func TestDecodeStateSemantics(t *testing.T) {
	tag := protowire.AppendTag
	str := func(b []byte, n protowire.Number, s string) []byte {
		return protowire.AppendString(tag(b, n, protowire.BytesType), s)
	}
	msg := func(b []byte, n protowire.Number, m []byte) []byte {
		return protowire.AppendBytes(tag(b, n, protowire.BytesType), m)
	}
	var (
		lastWins   = str(str(nil, 1, "first"), 1, "second")
		merged     = msg(msg(nil, 13, str(nil, 1, "dep")), 13, str(nil, 3, "attempt"))
		wrongType  = protowire.AppendVarint(tag(nil, 1, protowire.VarintType), 5) // request_id as a varint
		group      = tag(protowire.AppendVarint(tag(tag(nil, 50, protowire.StartGroupType), 1, protowire.VarintType), 1), 50, protowire.EndGroupType)
		fixed32    = protowire.AppendFixed32(tag(nil, 3, protowire.Fixed32Type), 9)
		nonMinimal = append(tag(nil, 14, protowire.VarintType), 0x85, 0x80, 0x00) // redirects = 5 in three bytes
		emptyValue = msg(nil, 12, protowire.AppendBytes(tag(str(nil, 1, "x-api-key"), 2, protowire.BytesType), nil))
	)
	cases := map[string][]byte{
		"last scalar wins":           lastWins,
		"repeated message merges":    merged,
		"wrong wire type is unknown": wrongType,
		"group is unknown":           group,
		"fixed32 is unknown":         fixed32,
		"non-minimal varint":         nonMinimal,
		"present empty header value": emptyValue,
		"truncated":                  lastWins[:len(lastWins)-2],
		"truncated nested":           merged[:len(merged)-1],
		"field number zero":          {0x02, 0x00},
		"end group without start":    tag(nil, 5, protowire.EndGroupType),
		"length beyond the end":      {0x0a, 0x7f, 'x'},
		"varint overflow":            append(tag(nil, 14, protowire.VarintType), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		"nested error in an attempt": msg(nil, 8, []byte{0x0a, 0x05, 'a'}),
		"deprecated tag wire type 6": {0x0e},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) { checkDecodeLikeProto(t, in) })
	}
}

// checkDecodeLikeProto fails unless decodeState and proto.Unmarshal agree on in: both fail,
// or both give equal states that the codec writes back as proto.Marshal does.
func checkDecodeLikeProto(t *testing.T, in []byte) {
	t.Helper()
	want := &statev1.State{}
	wantErr := proto.Unmarshal(in, want)
	got, err := decodeState(in)
	switch {
	case (err != nil) != (wantErr != nil):
		t.Fatalf("decodeState error %v, proto.Unmarshal error %v", err, wantErr)
	case err != nil:
		return
	case !proto.Equal(got, want):
		t.Fatalf("decodeState differs from proto.Unmarshal:\n got %v\nwant %v", got, want)
	}
	if b := appendState(nil, got); !bytes.Equal(b, protoBytes(t, want)) {
		t.Fatalf("re-encoded state differs from proto.Marshal:\n got %x\nwant %x", b, protoBytes(t, want))
	}
}

func TestDecodeStateHeaderValuesDoNotShareCapacity(t *testing.T) {
	st, err := decodeState(protoBytes(t, sampleState()))
	if err != nil {
		t.Fatal(err)
	}
	before := string(st.ClientHeaders[1].Value)
	st.ClientHeaders[0].Value = append(st.ClientHeaders[0].Value, "-appended"...)
	if got := string(st.ClientHeaders[1].Value); got != before {
		t.Fatalf("appending to one header value changed the next: %q, was %q", got, before)
	}
}

// The strings and the header values share one allocation: writing into every value, and
// appending to the last, leaves every string of the state as it was.
func TestDecodeStateHeaderValuesDoNotShareStrings(t *testing.T) {
	st, err := decodeState(protoBytes(t, sampleState()))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range st.ClientHeaders {
		h.Value = nil // compare the strings only
	}
	want := prototext.Format(st)
	st, _ = decodeState(protoBytes(t, sampleState()))
	for _, h := range st.ClientHeaders {
		for i := range h.Value {
			h.Value[i] = 'X'
		}
	}
	last := st.ClientHeaders[len(st.ClientHeaders)-1]
	last.Value = append(last.Value, strings.Repeat("Y", 64)...)
	for _, h := range st.ClientHeaders {
		h.Value = nil
	}
	if got := prototext.Format(st); got != want {
		t.Fatalf("writing into header values changed the state's strings:\n got %s\nwant %s", got, want)
	}
}

// FuzzDecodeState: on any input, decodeState agrees with proto.Unmarshal.
func FuzzDecodeState(f *testing.F) {
	for _, st := range []*statev1.State{sampleState(), everyFieldState(), {}} {
		b, err := proto.Marshal(st)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x7f, 'x'})
	f.Fuzz(func(t *testing.T, in []byte) { checkDecodeLikeProto(t, in) })
}

// BenchmarkStateCodec: the codec next to protobuf-go's on the same state, in one run.
func BenchmarkStateCodec(b *testing.B) {
	st := sampleState()
	raw := protoBytes(b, st)
	buf := make([]byte, 0, 4096)
	b.Run("encode/codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = appendState(buf[:0], st)
		}
	})
	b.Run("encode/protobuf-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = proto.MarshalOptions{}.MarshalAppend(buf[:0], st)
		}
	})
	b.Run("decode/codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeState(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/protobuf-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := proto.Unmarshal(raw, &statev1.State{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
