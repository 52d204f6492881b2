package storetest

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// runClientKeys: client keys are shared by every replica, created once per id, and gone for
// every replica once deleted.
func runClientKeys(t *testing.T, f Factory) {
	t.Run("SharedCreateOnceRevoke", func(t *testing.T) {
		s, replica := open(t, f)
		other := replica()
		k := store.ClientKey{ID: "k1", Name: "team-a", Hash: bytes.Repeat([]byte{7}, 32), Models: []string{"gpt-4o"}, CreatedAt: t0}
		if err := s.CreateClientKey(ctx(t), k); err != nil {
			t.Fatal(err)
		}
		if err := other.CreateClientKey(ctx(t), store.ClientKey{ID: "k1", Hash: []byte{1}}); !errors.Is(err, store.ErrExists) {
			t.Fatalf("second create of k1 on another replica: %v, want ErrExists", err)
		}
		got, err := other.ClientKey(ctx(t), "k1")
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != "k1" || got.Name != "team-a" || !bytes.Equal(got.Hash, k.Hash) || !slices.Equal(got.Models, k.Models) || !got.CreatedAt.Equal(t0) {
			t.Fatalf("replica read %+v, want %+v", got, k)
		}
		got.Hash[0] = 0 // a caller's copy: must not change the store
		if again, _ := s.ClientKey(ctx(t), "k1"); again.Hash[0] != 7 {
			t.Fatal("a returned key shares memory with the store")
		}
		if err := s.CreateClientKey(ctx(t), store.ClientKey{ID: "k0", Hash: []byte{2}, CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		list, err := other.ListClientKeys(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].ID != "k0" || list[1].ID != "k1" || len(list[0].Models) != 0 {
			t.Fatalf("list = %+v, want k0 (no allow-list) then k1", list)
		}
		if err := other.DeleteClientKey(ctx(t), "k1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ClientKey(ctx(t), "k1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("revoked key still read by the other replica: %v", err)
		}
		if err := s.DeleteClientKey(ctx(t), "k1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("second delete: %v, want ErrNotFound", err)
		}
	})

	t.Run("RevocationsReachEveryReplica", func(t *testing.T) {
		s, replica := open(t, f)
		other := replica()
		watch := other.WatchRevocations(t.Context())
		for _, id := range []string{"r1", "r2"} {
			if err := s.CreateClientKey(ctx(t), store.ClientKey{ID: id, Hash: []byte{3}, CreatedAt: t0}); err != nil {
				t.Fatal(err)
			}
		}
		// The subscription of a shared store may take a moment: revoke until announced.
		timeout := time.After(10 * time.Second)
		for _, id := range []string{"r1", "r2"} {
			if err := s.DeleteClientKey(ctx(t), id); err != nil {
				t.Fatal(err)
			}
			for got := ""; got != id; {
				select {
				case got = <-watch:
				case <-time.After(200 * time.Millisecond):
					if id == "r1" { // not subscribed yet: the announcement was lost, try a new key
						_ = s.CreateClientKey(ctx(t), store.ClientKey{ID: id, Hash: []byte{3}, CreatedAt: t0})
						_ = s.DeleteClientKey(ctx(t), id)
					}
				case <-timeout:
					t.Fatalf("revocation of %s not announced within 10s", id)
				}
			}
		}
	})

	t.Run("ConcurrentCreateOneWins", func(t *testing.T) {
		_, replica := open(t, f)
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			r := replica()
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = r.CreateClientKey(ctx(t), store.ClientKey{ID: "same", Hash: []byte{byte(i)}, CreatedAt: t0})
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, store.ErrExists):
				t.Fatalf("create: %v", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d creations of one id succeeded, want exactly 1", won)
		}
	})
}
