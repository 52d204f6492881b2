package attemptstate

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

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
	f.Add(valid, st.RequestID())
	f.Add(valid, "other")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, sealed, requestID string) {
		got, err := s.Open(sealed, requestID)
		if err != nil {
			if got != nil {
				t.Fatalf("Open returned a state with error %v", err)
			}
			if RejectionReason(err) == "" {
				t.Fatalf("rejection without a reason: %v", err)
			}
			return
		}
		if got.RequestID() != requestID {
			t.Fatalf("opened a state of request %q for %q", got.RequestID(), requestID)
		}
		if !clock.Now().Before(got.Deadline()) {
			t.Fatal("opened an expired state")
		}
		// What opens is what some seal produced: resealing and opening gives it back.
		again, err := s.Seal(got)
		if err != nil {
			t.Fatal(err)
		}
		back, err := s.Open(again, requestID)
		if err != nil || !proto.Equal(&back.m, &got.m) {
			t.Fatalf("reseal round trip: %v", err)
		}
	})
}

// The committed seeds still mean what their names say (a format change that left them stale
// would make the fuzzer start from garbage only).
func TestFuzzOpenStateSeeds(t *testing.T) {
	want := map[string]RejectReason{
		"valid": "", "valid-previous-key": "", "minimal": "",
		"other-request": RejectAuthFailed, "unknown-key": RejectUnknownKey, "expired": RejectExpired,
		"tampered": RejectAuthFailed, "truncated": RejectAuthFailed, "version-2": RejectMalformed,
		"empty": RejectMalformed, "garbage": RejectMalformed, "header-only": RejectMalformed,
	}
	s, err := NewSealer(Keys{Current: testKey(1), Previous: testKey(2)}, SealerOptions{Clock: fakeclock.New(t0)})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzOpenState")
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range files {
		name := f.Name()
		if !strings.HasPrefix(name, "seed-") {
			continue // a crasher the fuzzer saved: FuzzOpenState itself replays it
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var args []string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
			v, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(line, "string("), ")"))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			args = append(args, v)
		}
		kind := name[len("seed-00-"):]
		w, ok := want[kind]
		if !ok || len(args) != 2 {
			t.Errorf("%s: unexpected seed", name)
			continue
		}
		seen++
		if _, err := s.Open(args[0], args[1]); RejectionReason(err) != w {
			t.Errorf("%s: %v, want reason %q", name, err, w)
		}
	}
	if seen != len(want) {
		t.Errorf("%d seeds, want %d", seen, len(want))
	}
}
