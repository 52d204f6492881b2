package extproc

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-gw/switchyard/internal/fakeclock"
	statev1 "github.com/switchyard-gw/switchyard/proto/switchyard/state/v1"
)

// BenchmarkSealOpen: one seal and one open of a state with 3 attempts and 4 saved headers, as
// one redirect costs (target ≤ 5 µs, issue 9).
func BenchmarkSealOpen(b *testing.B) {
	s := newTestSealer(b, Keys{Current: testKey(1), Previous: testKey(2)}, fakeclock.New(t0))
	st := sampleState()
	sealed, err := s.Seal(st)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(sealed)))
	b.ReportAllocs()
	for b.Loop() {
		sealed, err := s.Seal(st)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Open(sealed, st.RequestId); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSealOpenBaseline: the same state marshalled and unmarshalled with no sealing or
// encoding, the least any protobuf state costs; compare BenchmarkSealOpen with it in the same
// run (absolute times swing on shared machines, docs/performance.md).
func BenchmarkSealOpenBaseline(b *testing.B) {
	st := sampleState()
	b.ReportAllocs()
	for b.Loop() {
		raw, err := proto.Marshal(st)
		if err != nil {
			b.Fatal(err)
		}
		if err := proto.Unmarshal(raw, &statev1.State{}); err != nil {
			b.Fatal(err)
		}
	}
}
