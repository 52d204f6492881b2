package admin_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/admin"
	"github.com/switchyard-gw/switchyard/internal/fakeclock"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
)

// keyStore is a real memory store of client keys with the faults a shared one shows: it
// can be unreachable, and it can lose its revocation announcements.
type keyStore struct {
	*memstore.Store
	down   atomic.Bool
	silent bool // WatchRevocations announces nothing
	reads  atomic.Int32
}

func (s *keyStore) ClientKey(ctx context.Context, id string) (store.ClientKey, error) {
	s.reads.Add(1)
	if s.down.Load() {
		return store.ClientKey{}, fmt.Errorf("injected outage: %w", store.ErrUnavailable)
	}
	return s.Store.ClientKey(ctx, id)
}

func (s *keyStore) WatchRevocations(ctx context.Context) <-chan string {
	if s.silent {
		return make(chan string)
	}
	return s.Store.WatchRevocations(ctx)
}

// addKey stores a well-formed key with id n and returns it.
func addKey(t *testing.T, s store.ClientKeys, n int, models ...string) (id, key string) {
	t.Helper()
	id = fmt.Sprintf("%016x", n)
	key = admin.ClientKeyPrefix + id + "_" + strings.Repeat("A", 43)
	sum := sha256.Sum256([]byte(key))
	if err := s.CreateClientKey(t.Context(), store.ClientKey{ID: id, Hash: sum[:], Models: models}); err != nil {
		t.Fatal(err)
	}
	return id, key
}

type verdict struct {
	ok, allowed bool
	err         error
}

func verify(t *testing.T, v *admin.Verifier, key string) verdict {
	t.Helper()
	ok, models, err := v.Verify(t.Context(), key)
	return verdict{ok, ok && (len(models) == 0 || slices.Contains(models, "gpt-4o")), err}
}

// TestKeyCacheThroughAnOutage: a key verified before the store became unreachable keeps
// working through the outage however long it lasts (its entry past MaxAge), trying the
// store at most once a second; a key never verified fails closed with the store's error.
func TestKeyCacheThroughAnOutage(t *testing.T) {
	s := &keyStore{Store: memstore.New()}
	clock := fakeclock.New(time.Unix(1000, 0))
	counts := map[string]int{}
	v := admin.NewVerifier(s, admin.VerifierOptions{MaxAge: 10 * time.Second, Now: clock.Now,
		Count: func(o string) { counts[o]++ }})
	_, known := addKey(t, s, 1)
	_, unknown := addKey(t, s, 2)
	if got := verify(t, v, known); !got.ok || got.err != nil {
		t.Fatalf("known key before the outage: %+v", got)
	}
	s.down.Store(true)
	reads := s.reads.Load()
	for i := range 100 { // 100 requests over 50 s of outage
		clock.Advance(500 * time.Millisecond)
		if got := verify(t, v, known); !got.ok || !got.allowed || got.err != nil {
			t.Fatalf("known key %d at %v into the outage: %+v, want it served from the cache", i, clock.Now().Sub(time.Unix(1000, 0)), got)
		}
	}
	if n := s.reads.Load() - reads; n > 50 {
		t.Fatalf("%d store reads for 100 requests of a cached key in 50 s, want at most one a second", n)
	}
	if got := verify(t, v, unknown); got.ok || !errors.Is(got.err, store.ErrUnavailable) {
		t.Fatalf("key never verified, store down: %+v, want the store's error (503, fail closed)", got)
	}
	if got := verify(t, v, admin.ClientKeyPrefix+"nothex"); got.ok || got.err != nil {
		t.Fatalf("malformed key, store down: %+v, want a plain refusal (401)", got)
	}
	if counts[admin.KeyLookupStale] == 0 || counts[admin.KeyLookupUnavailable] != 1 {
		t.Fatalf("lookup outcomes %v", counts)
	}
	s.down.Store(false)
	if got := verify(t, v, unknown); !got.ok {
		t.Fatalf("unknown key once the store is back: %+v", got)
	}
}

// TestKeyCacheRevocation: a revocation announced by the store drops the key at once, even
// while the store is then unreachable; one whose announcement is lost stops working within
// MaxAge while the store is reachable.
func TestKeyCacheRevocation(t *testing.T) {
	t.Run("announced", func(t *testing.T) {
		s := &keyStore{Store: memstore.New()}
		clock := fakeclock.New(time.Unix(1000, 0))
		v := admin.NewVerifier(s, admin.VerifierOptions{MaxAge: time.Hour, Now: clock.Now})
		id, key := addKey(t, s, 1)
		if !verify(t, v, key).ok {
			t.Fatal("key not verified")
		}
		if err := s.DeleteClientKey(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		s.down.Store(true) // the cache alone decides now
		if got := verify(t, v, key); got.ok {
			t.Fatalf("announced revocation: key still accepted from the cache: %+v", got)
		}
	})
	t.Run("lost", func(t *testing.T) {
		s := &keyStore{Store: memstore.New(), silent: true}
		clock := fakeclock.New(time.Unix(1000, 0))
		v := admin.NewVerifier(s, admin.VerifierOptions{MaxAge: 10 * time.Second, Now: clock.Now})
		id, key := addKey(t, s, 1)
		if !verify(t, v, key).ok {
			t.Fatal("key not verified")
		}
		if err := s.DeleteClientKey(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		clock.Advance(9 * time.Second)
		if !verify(t, v, key).ok {
			t.Fatal("within MaxAge the cached key is used without the store (this is what the bound allows)")
		}
		clock.Advance(time.Second)
		if got := verify(t, v, key); got.ok || got.err != nil {
			t.Fatalf("revoked key at MaxAge: %+v, want refused", got)
		}
		s.down.Store(true)
		if got := verify(t, v, key); got.ok {
			t.Fatalf("a key the store said was gone came back during an outage: %+v", got)
		}
	})
}

// TestKeyCacheIsBounded: past MaxEntries the least recently used key goes (and is read
// from the store again when presented); a wrong secret for a cached id is refused without
// the store.
func TestKeyCacheIsBounded(t *testing.T) {
	s := &keyStore{Store: memstore.New()}
	clock := fakeclock.New(time.Unix(1000, 0))
	v := admin.NewVerifier(s, admin.VerifierOptions{MaxEntries: 2, Now: clock.Now})
	_, k1 := addKey(t, s, 1)
	_, k2 := addKey(t, s, 2)
	_, k3 := addKey(t, s, 3, "claude")
	for _, k := range []string{k1, k2, k1, k3} { // k2 is the least recently used when k3 comes
		if !verify(t, v, k).ok {
			t.Fatal("key not verified")
		}
	}
	if n := v.CachedKeys(); n != 2 {
		t.Fatalf("%d keys cached, want 2", n)
	}
	reads := s.reads.Load()
	if got := verify(t, v, k3); !got.ok || got.allowed {
		t.Fatalf("k3 (claude only) for gpt-4o: %+v, want ok but not allowed", got)
	}
	verify(t, v, k1)
	wrong := k1[:len(k1)-1] + "B"
	if got := verify(t, v, wrong); got.ok {
		t.Fatalf("wrong secret for a cached id accepted: %+v", got)
	}
	if s.reads.Load() != reads {
		t.Fatalf("cached keys read the store %d times", s.reads.Load()-reads)
	}
	verify(t, v, k2)
	if s.reads.Load() != reads+1 {
		t.Fatal("the evicted key was not read from the store again")
	}
}
