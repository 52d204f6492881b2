package extproc

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-gw/switchyard/internal/fakeclock"
)

// FuzzOpenState: whatever a client puts in x-switchyard-state, Open neither panics nor
// accepts it unless it is a state this sealer sealed for that request, and every rejection
// carries a reason. The seed corpus (testdata/fuzz/FuzzOpenState) holds valid states sealed
// under the fuzz key, their near misses and plain garbage.
func FuzzOpenState(f *testing.F) {
	clock := fakeclock.New(t0)
	s, err := NewSealer(Keys{Current: testKey(1), Previous: testKey(2)}, SealerOptions{Clock: clock})
	if err != nil {
		f.Fatal(err)
	}
	st := sampleState()
	valid, err := s.Seal(st)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid, st.RequestId)
	f.Add(valid, "other")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, sealed, requestID string) {
		got, err := s.Open(sealed, requestID)
		if err != nil {
			if got != nil {
				t.Fatalf("Open returned a state with error %v", err)
			}
			if Reason(err) == "" {
				t.Fatalf("rejection without a reason: %v", err)
			}
			return
		}
		if got.GetRequestId() != requestID {
			t.Fatalf("opened a state of request %q for %q", got.GetRequestId(), requestID)
		}
		if !clock.Now().Before(time.Unix(0, got.GetDeadlineUnixNano())) {
			t.Fatal("opened an expired state")
		}
		// What opens is what some seal produced: resealing and opening gives it back.
		again, err := s.Seal(got)
		if err != nil {
			t.Fatal(err)
		}
		back, err := s.Open(again, requestID)
		if err != nil || !proto.Equal(back, got) {
			t.Fatalf("reseal round trip: %v", err)
		}
	})
}
