package attemptstate

import (
	"strconv"
	"testing"
	"time"

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
	benchSealOpen(b, s, st)
}

// BenchmarkSealOpenVsProto times, in each iteration, one seal + open and one bare protobuf
// marshal + unmarshal of the same state (the least any protobuf state costs), alternating
// which goes first, and reports both and their ratio: absolute times swing on the shared VM,
// the ratio much less (docs/performance.md).
func BenchmarkSealOpenVsProto(b *testing.B) {
	s := newTestSealer(b, Keys{Current: testKey(1)}, fakeclock.New(t0))
	st := sampleState()
	var sealT, protoT time.Duration
	sealOpen := func() {
		t := time.Now()
		sealed, err := s.Seal(st)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Open(sealed, st.RequestID()); err != nil {
			b.Fatal(err)
		}
		sealT += time.Since(t)
	}
	bare := func() {
		t := time.Now()
		raw, err := proto.Marshal(&st.m)
		if err != nil {
			b.Fatal(err)
		}
		if err := proto.Unmarshal(raw, &statev1.State{}); err != nil {
			b.Fatal(err)
		}
		protoT += time.Since(t)
	}
	n := 0
	for b.Loop() {
		if n%2 == 0 {
			sealOpen()
			bare()
		} else {
			bare()
			sealOpen()
		}
		n++
	}
	b.ReportMetric(float64(sealT.Nanoseconds())/float64(n), "sealopen-ns/op")
	b.ReportMetric(float64(protoT.Nanoseconds())/float64(n), "proto-ns/op")
	b.ReportMetric(float64(sealT)/float64(protoT), "ratio")
}

// BenchmarkSealOpenFirstPass: the state of a request's first attempt (no attempts yet, the
// client headers a chat request saves), which every request pays once in the route role
// (seal) and once in the attempt role (open).
func BenchmarkSealOpenFirstPass(b *testing.B) {
	s := newTestSealer(b, Keys{Current: testKey(1)}, fakeclock.New(t0))
	st := sampleState()
	st.m.Attempts, st.m.Skips, st.m.Redirects = nil, nil, 0
	st.m.ClientHeaders = st.m.ClientHeaders[:2]
	for _, h := range []string{":scheme", ":authority", ":path"} {
		st.SaveHeader(h, []byte("x"), true)
	}
	benchSealOpen(b, s, st)
}

// BenchmarkSealOpenByAttempts: seal + open of the sample state with its first n attempts,
// from a first pass (n = 0, the skips and the current attempt kept) to three redirects: the
// cost per finished attempt the state carries.
func BenchmarkSealOpenByAttempts(b *testing.B) {
	s := newTestSealer(b, Keys{Current: testKey(1)}, fakeclock.New(t0))
	for n := 0; n <= 3; n++ {
		st := sampleState()
		st.m.Attempts = st.m.Attempts[:n]
		b.Run(strconv.Itoa(n), func(b *testing.B) { benchSealOpen(b, s, st) })
	}
}

// benchSealOpen times one seal and one open of st per iteration.
func benchSealOpen(b *testing.B, s *Sealer, st *State) {
	b.ReportAllocs()
	for b.Loop() {
		sealed, err := s.Seal(st)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Open(sealed, st.RequestID()); err != nil {
			b.Fatal(err)
		}
	}
}
