package attemptstate

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-gw/switchyard/internal/fakeclock"
	statev1 "github.com/switchyard-gw/switchyard/proto/switchyard/state/v1"
	"github.com/switchyard-gw/switchyard/routing/store/storetest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func newTestSealer(t testing.TB, keys Keys, clock *fakeclock.Clock) *Sealer {
	t.Helper()
	s, err := NewSealer(keys, SealerOptions{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sampleState is a state with 3 attempts and 4 saved headers, as after two failovers.
func sampleState() *State {
	general := statev1.FallbackReason_FALLBACK_REASON_GENERAL
	st := &State{}
	st.m = statev1.State{
		RequestId:        []byte("6f1c2a9e-8d3b-4c7a-9e21-0b5d4f3a2c10"),
		PublicModel:      "gpt-4o",
		Operation:        statev1.Operation_OPERATION_TEXT,
		Mode:             statev1.Mode_MODE_JSON,
		StartUnixNano:    t0.UnixNano(),
		DeadlineUnixNano: t0.Add(30 * time.Minute).UnixNano(),
		Dialect:          statev1.Dialect_DIALECT_OPENAI_CHAT,
		Reason:           statev1.FallbackReason_FALLBACK_REASON_GENERAL,
		Attempts: []*statev1.Attempt{
			{DeploymentId: "azure-eastus", Model: "gpt-4o", Class: statev1.Class_CLASS_TRANSIENT, Kind: "server_error", Status: 503,
				LatencyNanos: int64(812 * time.Millisecond), Message: "The server is temporarily unavailable.", ErrorType: "server_error", Move: statev1.Move_MOVE_FIRST, FallbackReason: general},
			{DeploymentId: "openai-main", Model: "gpt-4o", Class: statev1.Class_CLASS_THROTTLE, Kind: "rate_limit", Status: 429,
				LatencyNanos: int64(95 * time.Millisecond), RetryAfterNanos: int64(20 * time.Second), Message: "Rate limit reached for gpt-4o.",
				ErrorType: "requests", ErrorCode: "rate_limit_exceeded", Move: statev1.Move_MOVE_FAILOVER, FallbackReason: general},
			{DeploymentId: "claude-sonnet", Model: "claude-sonnet-4", Class: statev1.Class_CLASS_TRANSIENT, Kind: "overloaded", Status: 529,
				LatencyNanos: int64(1200 * time.Millisecond), Message: "Overloaded", ErrorType: "overloaded_error", Move: statev1.Move_MOVE_FALLBACK, FallbackReason: general, FallbackHop: 1},
		},
		Skips: []*statev1.Skip{{DeploymentId: "mini-local", Model: "gpt-4o", Reason: "tools not supported"}},
		ClientHeaders: []*statev1.Header{
			{Name: "authorization", Value: []byte("Bearer sk-client-abcdefghijklmnopqrstuvwxyz0123456789")},
			{Name: "content-length", Value: []byte("4096")},
			{Name: "anthropic-version"},
			{Name: "x-api-key", Value: []byte{}},
		},
		Current: &statev1.Current{DeploymentId: "claude-sonnet", Model: "claude-sonnet-4", AttemptId: []byte("6f1c2a9e-4"),
			StartUnixNano: t0.Add(3 * time.Second).UnixNano(), Move: statev1.Move_MOVE_FALLBACK, FallbackReason: general, FallbackHop: 1, Probe: true},
		Redirects: 3,
	}
	return st
}

func TestSealOpenRoundTrip(t *testing.T) {
	clock := fakeclock.New(t0.Add(time.Minute))
	s := newTestSealer(t, Keys{Current: testKey(1)}, clock)
	st := sampleState()
	sealed, err := s.Seal(st)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(sealed, "+/=") {
		t.Errorf("sealed state %q is not unpadded base64url", sealed)
	}
	if strings.Contains(sealed, "sk-client") {
		t.Error("sealed state shows the client's key")
	}
	got, err := s.Open(sealed, st.RequestID())
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&st.m, &got.m) {
		t.Errorf("opened state differs:\nsealed %v\nopened %v", prototext.Format(&st.m), prototext.Format(&got.m))
	}
	// Absent and empty headers stay distinct through the wire.
	if _, present, saved := got.SavedHeader("anthropic-version"); !saved || present {
		t.Errorf("anthropic-version: saved %v present %v, want saved and absent", saved, present)
	}
	if v, present, saved := got.SavedHeader("x-api-key"); !saved || !present || len(v) != 0 {
		t.Errorf("x-api-key: saved %v present %v value %q, want saved, present and empty", saved, present, v)
	}
	// Two seals of one state differ (fresh nonce each time).
	again, err := s.Seal(st)
	if err != nil {
		t.Fatal(err)
	}
	if again == sealed {
		t.Error("two seals of the same state are identical: nonce reused")
	}
}

func TestSealNotUTF8(t *testing.T) {
	// Client-controlled strings need not be UTF-8 (HTTP allows obs-text); sealing must not
	// fail on them (the proto's utf8_validation NONE).
	clock := fakeclock.New(t0)
	s := newTestSealer(t, Keys{Current: testKey(1)}, clock)
	st := sampleState()
	st.m.RequestId = []byte("req-\xff\xfe")
	st.m.ClientHeaders[0].Value = []byte("\xff")
	sealed, err := s.Seal(st)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Open(sealed, st.RequestID())
	if err != nil {
		t.Fatal(err)
	}
	if got.RequestID() != st.RequestID() {
		t.Errorf("request id %q, want %q", got.RequestID(), st.RequestID())
	}
}

func TestOpenRotation(t *testing.T) {
	clock := fakeclock.New(t0)
	old := newTestSealer(t, Keys{Current: testKey(1)}, clock)
	st := sampleState()
	sealedOld, err := old.Seal(st)
	if err != nil {
		t.Fatal(err)
	}
	rotated := newTestSealer(t, Keys{Current: testKey(2), Previous: testKey(1)}, clock)
	if _, err := rotated.Open(sealedOld, st.RequestID()); err != nil {
		t.Fatalf("state sealed under the previous key: %v", err)
	}
	sealedNew, err := rotated.Seal(st)
	if err != nil {
		t.Fatal(err)
	}
	// Rotation in progress: a replica still on the old order (new key as previous) opens it.
	lagging := newTestSealer(t, Keys{Current: testKey(1), Previous: testKey(2)}, clock)
	if _, err := lagging.Open(sealedNew, st.RequestID()); err != nil {
		t.Fatalf("state sealed under the new key on a replica holding it as previous: %v", err)
	}
	// The old key dropped: its states are unknown_key, not a decryption attempt.
	done := newTestSealer(t, Keys{Current: testKey(2)}, clock)
	if _, err := done.Open(sealedOld, st.RequestID()); RejectionReason(err) != RejectUnknownKey {
		t.Fatalf("state under a dropped key: %v, want %s", err, RejectUnknownKey)
	}
	other := newTestSealer(t, Keys{Current: testKey(3), Previous: testKey(4)}, clock)
	if _, err := other.Open(sealedNew, st.RequestID()); RejectionReason(err) != RejectUnknownKey {
		t.Fatalf("state under a key never held: %v, want %s", err, RejectUnknownKey)
	}
}

func TestNewSealerRejectsBadKeys(t *testing.T) {
	for name, k := range map[string]Keys{
		"short current":  {Current: testKey(1)[:16]},
		"no current":     {},
		"long previous":  {Current: testKey(1), Previous: append(testKey(2), 0)},
		"same key twice": {Current: testKey(1), Previous: testKey(1)},
	} {
		if _, err := NewSealer(k, SealerOptions{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestOpenRejectsTampering(t *testing.T) {
	clock := fakeclock.New(t0)
	s := newTestSealer(t, Keys{Current: testKey(1), Previous: testKey(2)}, clock)
	st := sampleState()
	sealed, err := s.Seal(st)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := b64.DecodeString(sealed)
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		for _, flip := range []byte{0x01, 0x80} {
			b := bytes.Clone(raw)
			b[i] ^= flip
			_, err := s.Open(b64.EncodeToString(b), st.RequestID())
			want := RejectAuthFailed
			switch i {
			case 0:
				want = RejectMalformed
			case 1:
				want = RejectUnknownKey
				if s.key(b[1]) != nil {
					want = RejectAuthFailed // flipped onto the previous key's id
				}
			}
			if RejectionReason(err) != want {
				t.Fatalf("byte %d ^ %#x: %v, want %s", i, flip, err, want)
			}
		}
	}
	// Truncated and extended blobs.
	for _, b := range [][]byte{raw[:len(raw)-1], raw[:headerSize+16], append(bytes.Clone(raw), 0)} {
		if _, err := s.Open(b64.EncodeToString(b), st.RequestID()); RejectionReason(err) != RejectAuthFailed {
			t.Errorf("blob of %d bytes (sealed %d): %v, want %s", len(b), len(raw), err, RejectAuthFailed)
		}
	}
}

func TestOpenRejectsOtherRequest(t *testing.T) {
	clock := fakeclock.New(t0)
	s := newTestSealer(t, Keys{Current: testKey(1)}, clock)
	st := sampleState()
	sealed, err := s.Seal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", st.RequestID() + "x", strings.ToUpper(st.RequestID()), st.RequestID()[:len(st.RequestID())-1]} {
		if _, err := s.Open(sealed, id); RejectionReason(err) != RejectAuthFailed {
			t.Errorf("opened for request %q: %v, want %s", id, err, RejectAuthFailed)
		}
	}
}

func TestOpenRejectsExpired(t *testing.T) {
	clock := fakeclock.New(t0)
	s := newTestSealer(t, Keys{Current: testKey(1)}, clock)
	st := sampleState()
	sealed, err := s.Seal(st)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Unix(0, st.m.DeadlineUnixNano)
	clock.Advance(deadline.Sub(t0) - time.Nanosecond)
	if _, err := s.Open(sealed, st.RequestID()); err != nil {
		t.Fatalf("a nanosecond before the deadline: %v", err)
	}
	clock.Advance(time.Nanosecond)
	if _, err := s.Open(sealed, st.RequestID()); RejectionReason(err) != RejectExpired {
		t.Fatalf("at the deadline: %v, want %s", err, RejectExpired)
	}
}

func TestOpenRejectsGarbage(t *testing.T) {
	clock := fakeclock.New(t0)
	s := newTestSealer(t, Keys{Current: testKey(1)}, clock)
	valid, err := s.Seal(sampleState())
	if err != nil {
		t.Fatal(err)
	}
	random := make([]byte, 300)
	if _, err := rand.Read(random); err != nil {
		t.Fatal(err)
	}
	// An authentic blob whose plaintext is not a State: only a broken replica seals that.
	k := s.current
	notProto := append([]byte{sealVersion, k.id}, make([]byte, nonceSize)...)
	notProto = k.aead.Seal(notProto, notProto[2:headerSize], []byte{0xff, 0xff, 0xff}, append(bytes.Clone(notProto[:2]), "r"...))

	cases := []struct {
		name, in string
		want     RejectReason
	}{
		{"empty", "", RejectMalformed},
		{"not base64", "not a state!", RejectMalformed},
		{"padded", valid + "==", RejectMalformed},
		{"standard base64", base64.StdEncoding.EncodeToString(random), RejectMalformed},
		{"short", b64.EncodeToString([]byte{sealVersion, k.id, 1, 2, 3}), RejectMalformed},
		{"other version", b64.EncodeToString(append([]byte{2}, random...)), RejectMalformed},
		{"random", b64.EncodeToString(append([]byte{sealVersion, k.id}, random...)), RejectAuthFailed},
		{"huge", strings.Repeat("A", MaxSealedLen+1), RejectMalformed},
		{"huge valid prefix", valid + strings.Repeat("A", MaxSealedLen), RejectMalformed},
		{"authentic, not a state", b64.EncodeToString(notProto), RejectMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, err := s.Open(c.in, "r")
			if st != nil || RejectionReason(err) != c.want {
				t.Fatalf("Open: state %v, err %v; want %s", st, err, c.want)
			}
		})
	}
}

func TestSealRefusesOversizedState(t *testing.T) {
	s := newTestSealer(t, Keys{Current: testKey(1)}, fakeclock.New(t0))
	st := sampleState()
	st.m.ClientHeaders = append(st.m.ClientHeaders, &statev1.Header{Name: "cookie", Value: bytes.Repeat([]byte("a"), MaxSealedLen)})
	if _, err := s.Seal(st); err == nil {
		t.Fatal("sealed a state above MaxSealedLen")
	}
}

func TestSealNonceFromReader(t *testing.T) {
	// The nonce comes from the injected reader, and a failing reader fails the seal rather
	// than sealing with a zero nonce.
	nonce := bytes.Repeat([]byte{0xab}, nonceSize)
	s, err := NewSealer(Keys{Current: testKey(1)}, SealerOptions{Clock: fakeclock.New(t0), Rand: bytes.NewReader(nonce)})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := s.Seal(sampleState())
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := b64.DecodeString(sealed)
	if !bytes.Equal(raw[2:headerSize], nonce) {
		t.Errorf("nonce %x, want %x", raw[2:headerSize], nonce)
	}
	if _, err := s.Seal(sampleState()); err == nil {
		t.Error("sealed with an exhausted nonce source")
	}
}

func TestRejectionReasonOfOtherErrors(t *testing.T) {
	if r := RejectionReason(proto.Error); r != "" {
		t.Errorf("RejectionReason of a foreign error = %q", r)
	}
}

// Replicas' roles seal and open on many streams at once through one Sealer (shared AEADs and
// pooled buffers): every state opens as exactly what was sealed for its request. Run with
// -race.
func TestSealerConcurrent(t *testing.T) {
	s := newTestSealer(t, Keys{Current: testKey(1), Previous: testKey(2)}, fakeclock.New(t0))
	errs := make(chan error, 16)
	storetest.Concurrently(16, func(i int) {
		for j := range 50 {
			st := sampleState()
			st.m.RequestId = []byte(fmt.Sprintf("req-%d-%d", i, j))
			st.m.Redirects = uint32(j)
			// Vary the size so pooled buffers of other sizes get reused.
			st.m.ClientHeaders[1].Value = bytes.Repeat([]byte("9"), 1+(i*j)%300)
			sealed, err := s.Seal(st)
			if err != nil {
				errs <- err
				return
			}
			got, err := s.Open(sealed, st.RequestID())
			if err != nil {
				errs <- err
				return
			}
			if !proto.Equal(&got.m, &st.m) {
				errs <- fmt.Errorf("request %s opened as %v", st.RequestID(), prototext.Format(&got.m))
				return
			}
		}
	})
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
