package extproc

import (
	"testing"

	"github.com/switchyard-gw/switchyard/internal/fakeclock"
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
