package attemptstate

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/switchyard-gw/switchyard/internal/fakeclock"
	statev1 "github.com/switchyard-gw/switchyard/proto/switchyard/state/v1"
)

// fill sets every field of m (through the descriptor, so a field added to state.proto is
// covered without a change here) to a value that is not its zero.
func fill(t *testing.T, m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		switch {
		case f.Kind() == protoreflect.MessageKind && f.IsList():
			l := m.Mutable(f).List()
			for range 2 {
				e := l.NewElement()
				fill(t, e.Message(), depth+1)
				l.Append(e)
			}
		case f.Kind() == protoreflect.MessageKind:
			fill(t, m.Mutable(f).Message(), depth+1)
		case f.IsList():
			l := m.Mutable(f).List()
			l.Append(scalar(t, f, i))
			l.Append(scalar(t, f, i+1))
		default:
			m.Set(f, scalar(t, f, i))
		}
	}
}

func scalar(t *testing.T, f protoreflect.FieldDescriptor, i int) protoreflect.Value {
	switch f.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(string(f.Name()) + "-value")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte("\xff" + string(f.Name())))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(f.Enum().Values().Get(f.Enum().Values().Len() - 1).Number())
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(int32(300 + i))
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(uint32(300 + i))
	case protoreflect.Int64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(1)<<40 + int64(i))
	}
	t.Fatalf("field %s: kind %v not covered", f.FullName(), f.Kind())
	return protoreflect.Value{}
}

// The generated codec writes protobuf: protobuf-go reads back exactly what it wrote, and
// writes what it reads, for a state with every field set.
func TestGeneratedCodecIsProtobuf(t *testing.T) {
	want := &statev1.State{}
	fill(t, want.ProtoReflect(), 0)
	raw, err := want.MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	got := &statev1.State{}
	if err := proto.Unmarshal(raw, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Errorf("protobuf-go read\n%v\nwant\n%v", got, want)
	}
	viaProto, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	back := &statev1.State{}
	if err := back.UnmarshalVTUnsafe(viaProto); err != nil || !proto.Equal(back, want) {
		t.Errorf("the generated codec read protobuf-go's encoding as %v (%v)", back, err)
	}
	// And through a seal: the opened state is the sealed one.
	clock := fakeclock.New(t0)
	s := newTestSealer(t, Keys{Current: testKey(1)}, clock)
	st := &State{}
	proto.Merge(&st.m, want)
	st.m.DeadlineUnixNano = t0.Add(1 << 40).UnixNano()
	st.m.RequestId = []byte("req-1")
	sealed, err := s.Seal(st)
	if err != nil {
		t.Fatal(err)
	}
	opened, err := s.Open(sealed, "req-1")
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&opened.m, &st.m) {
		t.Errorf("opened\n%v\nwant\n%v", &opened.m, &st.m)
	}
}

// An opened state's byte fields share one copy of the plaintext with its strings: an append
// to one must not write over another or any string.
func TestOpenedValuesDoNotShareCapacity(t *testing.T) {
	clock := fakeclock.New(t0)
	s := newTestSealer(t, Keys{Current: testKey(1)}, clock)
	st := sampleState()
	sealed, err := s.Seal(st)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Open(sealed, st.RequestID())
	if err != nil {
		t.Fatal(err)
	}
	before := proto.Clone(&got.m).(*statev1.State)
	for _, h := range got.m.ClientHeaders {
		if h.Value != nil {
			_ = append(h.Value, bytes.Repeat([]byte("X"), 64)...)
		}
	}
	_ = append(got.m.RequestId, "XXXXXXXX"...)
	_ = append(got.m.Current.AttemptId, "XXXXXXXX"...)
	if !proto.Equal(&got.m, before) {
		t.Errorf("an append to one value changed the state:\n%v\nwant\n%v", &got.m, before)
	}
}
