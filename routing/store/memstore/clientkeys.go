package memstore

import (
	"context"
	"slices"
	"sort"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// CreateClientKey implements store.ClientKeys.
func (s *Store) CreateClientKey(_ context.Context, k store.ClientKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clients[k.ID]; ok {
		return store.ErrExists
	}
	s.clients[k.ID] = cloneClientKey(k)
	return nil
}

// ClientKey implements store.ClientKeys.
func (s *Store) ClientKey(_ context.Context, id string) (store.ClientKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.clients[id]
	if !ok {
		return store.ClientKey{}, store.ErrNotFound
	}
	return cloneClientKey(k), nil
}

// ListClientKeys implements store.ClientKeys.
func (s *Store) ListClientKeys(context.Context) ([]store.ClientKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]store.ClientKey, 0, len(s.clients))
	for _, k := range s.clients {
		out = append(out, cloneClientKey(k))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// DeleteClientKey implements store.ClientKeys.
func (s *Store) DeleteClientKey(_ context.Context, id string) error {
	s.mu.Lock()
	if _, ok := s.clients[id]; !ok {
		s.mu.Unlock()
		return store.ErrNotFound
	}
	delete(s.clients, id)
	s.mu.Unlock()
	s.revoked.Notify(id)
	return nil
}

// WatchRevocations implements store.ClientKeys.
func (s *Store) WatchRevocations(ctx context.Context) <-chan string {
	return s.revoked.Add(ctx)
}

// cloneClientKey copies the slices, so no caller shares stored state.
func cloneClientKey(k store.ClientKey) store.ClientKey {
	k.Hash = slices.Clone(k.Hash)
	k.Models = slices.Clone(k.Models)
	return k
}
