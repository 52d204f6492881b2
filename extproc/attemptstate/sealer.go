package attemptstate

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/switchyard-gw/switchyard/internal/clock"
)

// A sealed state travels through Envoy as dynamic metadata and as the x-switchyard-state
// header, where a client can see it and forge it. It is
// sealed with AES-256-GCM under keys shared by the replicas, so that any replica can open what
// another sealed, and nobody else can read or change it:
//
//	base64url-no-padding( version | key id | nonce (12) | ciphertext | tag (16) )
//
// with the two leading bytes and the request id as additional authenticated data, so a state
// is only valid for the request it was sealed for. It expires at the request's deadline.
const (
	sealVersion = 1
	nonceSize   = 12
	headerSize  = 2 + nonceSize
	// MaxSealedLen bounds a sealed state as it travels (base64 characters). Open refuses
	// anything longer before decoding it, and Seal refuses to produce it: Envoy's default
	// header map limit is 60 KiB for all headers together.
	MaxSealedLen = 32 << 10
	// KeySize is the length of a state key (AES-256).
	KeySize = 32
)

// RejectReason says why Open refused a state, as the label of
// switchyard_state_rejected_total{reason}.
type RejectReason string

const (
	// RejectMalformed: not base64url, too short or too long, an unknown format version, or
	// a plaintext that does not parse.
	RejectMalformed RejectReason = "malformed"
	// RejectUnknownKey: sealed under a key this replica does not hold (rotated out, or
	// another deployment's).
	RejectUnknownKey RejectReason = "unknown_key"
	// RejectAuthFailed: authentication failed: a wrong key with a colliding id, a tampered
	// byte, or a state sealed for another request id.
	RejectAuthFailed RejectReason = "auth_failed"
	// RejectExpired: the request's deadline has passed.
	RejectExpired RejectReason = "expired"
)

// OpenError is Open's error: a reason to count and the detail to log.
type OpenError struct {
	Reason RejectReason
	Err    error
}

func (e *OpenError) Error() string { return "attempt state " + string(e.Reason) + ": " + e.Err.Error() }

func (e *OpenError) Unwrap() error { return e.Err }

// RejectionReason returns why err rejected a state, or "" when err is not an *OpenError.
func RejectionReason(err error) RejectReason {
	var oe *OpenError
	if errors.As(err, &oe) {
		return oe.Reason
	}
	return ""
}

func reject(r RejectReason, format string, args ...any) error {
	return &OpenError{Reason: r, Err: fmt.Errorf(format, args...)}
}

// Sealer seals and opens attempt states. It is safe for concurrent use: its fields are set
// once by NewSealer, and cipher.AEAD from crypto/aes is stateless.
type Sealer struct {
	current  sealKey
	previous *sealKey
	clock    clock.Clock
	rand     io.Reader
	// scratch holds *[]byte working buffers, so a seal allocates only its result and an
	// open only the state (every redirect pays both).
	scratch sync.Pool
}

type sealKey struct {
	id   byte
	aead cipher.AEAD
}

// SealerOptions are NewSealer's injectable parts.
type SealerOptions struct {
	// Clock decides expiry; the wall clock when nil.
	Clock clock.Clock
	// Rand supplies nonces; crypto/rand when nil. Only tests replace it.
	Rand io.Reader
}

// NewSealer returns a Sealer that seals under keys.Current and opens states sealed under
// keys.Current or keys.Previous, so replicas can rotate keys without dropping requests: first
// add the new key as previous everywhere, then swap current and previous, then drop the old.
func NewSealer(keys Keys, opts SealerOptions) (*Sealer, error) {
	cur, err := newSealKey(keys.Current)
	if err != nil {
		return nil, fmt.Errorf("current state key: %w", err)
	}
	s := &Sealer{current: cur, clock: opts.Clock, rand: opts.Rand}
	if keys.Previous != nil {
		prev, err := newSealKey(keys.Previous)
		if err != nil {
			return nil, fmt.Errorf("previous state key: %w", err)
		}
		if prev.id == cur.id {
			// The id picks the key without trial decryption; two keys sharing one would make
			// every state of one of them fail (and identical keys are a mistake anyway).
			return nil, errors.New("the previous state key has the same key id as the current one (or is the same key): generate another key")
		}
		s.previous = &prev
	}
	if s.clock == nil {
		s.clock = clock.System{}
	}
	if s.rand == nil {
		s.rand = rand.Reader
	}
	return s, nil
}

func newSealKey(k []byte) (sealKey, error) {
	if len(k) != KeySize {
		return sealKey{}, fmt.Errorf("a state key is %d bytes, got %d", KeySize, len(k))
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return sealKey{}, fmt.Errorf("creating AES cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return sealKey{}, fmt.Errorf("creating GCM: %w", err)
	}
	return sealKey{id: keyID(k), aead: aead}, nil
}

// keyID derives a key's id from the key itself, so every replica agrees on it whatever the
// order of its configured keys, and the id reveals nothing usable about the key.
func keyID(k []byte) byte {
	h := sha256.New()
	h.Write([]byte("switchyard state key id\x00"))
	h.Write(k)
	return h.Sum(nil)[0]
}

func (s *Sealer) key(id byte) *sealKey {
	switch {
	case id == s.current.id:
		return &s.current
	case s.previous != nil && id == s.previous.id:
		return s.previous
	}
	return nil
}

// getScratch returns a working buffer of length n (its capacity is what earlier uses left).
func (s *Sealer) getScratch(n int) *[]byte {
	if p, ok := s.scratch.Get().(*[]byte); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	b := make([]byte, n)
	return &b
}

func (s *Sealer) putScratch(p *[]byte) {
	if cap(*p) <= 2*MaxSealedLen {
		s.scratch.Put(p)
	}
}

// b64 is the sealed string's alphabet: it travels in a header and in metadata.
var b64 = base64.RawURLEncoding

// Seal returns st sealed under the current key, bound to its request id.
func (s *Sealer) Seal(st *State) (string, error) {
	k := &s.current
	m := &st.m
	// Scratch layout: additional data | version, key id, nonce | plaintext, then ciphertext
	// and tag in its place | base64.
	p := s.getScratch(0)
	defer s.putScratch(p)
	buf := append((*p)[:0], sealVersion, k.id)
	buf = append(buf, m.RequestId...)
	ad := len(buf)
	buf = append(buf, sealVersion, k.id)
	buf = append(buf, make([]byte, nonceSize)...)
	if _, err := io.ReadFull(s.rand, buf[ad+2:ad+headerSize]); err != nil {
		return "", fmt.Errorf("sealing the attempt state: reading a nonce: %w", err)
	}
	plain := len(buf)
	size := m.SizeVT()
	blob := headerSize + size + k.aead.Overhead()
	if b64.EncodedLen(blob) > MaxSealedLen {
		return "", fmt.Errorf("sealing the attempt state: %d bytes sealed, above the limit of %d", b64.EncodedLen(blob), MaxSealedLen)
	}
	buf = slices.Grow(buf, size+k.aead.Overhead()+b64.EncodedLen(blob))[:plain+size]
	if _, err := m.MarshalToSizedBufferVT(buf[plain:]); err != nil {
		return "", fmt.Errorf("sealing the attempt state: %w", err)
	}
	// In place: the ciphertext overwrites the plaintext (cipher.AEAD allows exact overlap).
	sealed := k.aead.Seal(buf[ad:ad+headerSize], buf[ad+2:ad+headerSize], buf[plain:], buf[:ad])
	out := buf[ad+blob : ad+blob+b64.EncodedLen(blob)]
	b64.Encode(out, sealed)
	*p = buf
	return string(out), nil
}

// Open verifies and decrypts a sealed state for request requestID. Every error is an
// *OpenError; RejectionReason tells which kind.
func (s *Sealer) Open(sealed, requestID string) (*State, error) {
	if len(sealed) > MaxSealedLen {
		return nil, reject(RejectMalformed, "%d bytes, above the limit of %d", len(sealed), MaxSealedLen)
	}
	// Scratch layout: additional data | decoded blob.
	ad := 2 + len(requestID)
	p := s.getScratch(ad + b64.DecodedLen(len(sealed)))
	defer s.putScratch(p)
	buf := *p
	n, err := b64.Decode(buf[ad:], []byte(sealed))
	if err != nil {
		return nil, reject(RejectMalformed, "decoding base64url: %w", err)
	}
	raw := buf[ad : ad+n]
	if len(raw) < headerSize+16 {
		return nil, reject(RejectMalformed, "%d bytes, too short", len(raw))
	}
	if raw[0] != sealVersion {
		return nil, reject(RejectMalformed, "unknown format version %d", raw[0])
	}
	k := s.key(raw[1])
	if k == nil {
		return nil, reject(RejectUnknownKey, "sealed under key id %d, not held here", raw[1])
	}
	buf[0], buf[1] = raw[0], raw[1]
	copy(buf[2:ad], requestID)
	plain, err := k.aead.Open(raw[headerSize:headerSize], raw[2:headerSize], raw[headerSize:], buf[:ad])
	if err != nil {
		return nil, reject(RejectAuthFailed, "request %q: %w", requestID, err)
	}
	st, err := decode(plain)
	if err != nil {
		// Authentic but unparseable: only a replica with an incompatible schema seals that.
		return nil, reject(RejectMalformed, "unmarshalling: %w", err)
	}
	if string(st.m.RequestId) != requestID {
		// The additional data already binds the request id; this guards the schema.
		return nil, reject(RejectAuthFailed, "sealed for request %q, not %q", st.m.RequestId, requestID)
	}
	if dl := st.Deadline(); !s.clock.Now().Before(dl) {
		return nil, reject(RejectExpired, "the deadline %s has passed", dl.UTC().Format(time.RFC3339Nano))
	}
	return st, nil
}

// decode unmarshals a plaintext the scratch holds. Its strings and byte fields point into one
// copy of it (vtprotobuf's UnmarshalVTUnsafe), so an open allocates that copy and the
// messages; the byte fields are capped at their length so an append to one cannot write
// over the next.
func decode(plain []byte) (*State, error) {
	own := make([]byte, len(plain))
	copy(own, plain)
	st := &State{}
	if err := st.m.UnmarshalVTUnsafe(own); err != nil {
		return nil, err
	}
	st.m.RequestId = capped(st.m.RequestId)
	for _, h := range st.m.ClientHeaders {
		h.Value = capped(h.Value)
	}
	if c := st.m.Current; c != nil {
		c.AttemptId = capped(c.AttemptId)
	}
	return st, nil
}

func capped(b []byte) []byte {
	if b == nil {
		return nil
	}
	return b[:len(b):len(b)]
}
