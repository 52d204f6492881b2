package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// Client API keys live in one hash, id → JSON record (hash, never the key; docs/redis.md).

type clientKeyRecord struct {
	Name      string    `json:"name,omitempty"`
	Hash      []byte    `json:"hash"`
	Models    []string  `json:"models,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// CreateClientKey implements store.ClientKeys with HSETNX, so two creations of one id
// cannot both succeed.
func (s *Store) CreateClientKey(ctx context.Context, k store.ClientKey) error {
	b, err := json.Marshal(clientKeyRecord{Name: k.Name, Hash: k.Hash, Models: k.Models, CreatedAt: k.CreatedAt})
	if err != nil {
		return fmt.Errorf("redisstore: create client key: %w", err)
	}
	ctx, cancel := s.cfgCtx(ctx)
	defer cancel()
	created, err := s.rdb.HSetNX(ctx, s.keys.clientKeys(), k.ID, b).Result()
	if err != nil {
		return unavailable("create client key", err)
	}
	if !created {
		return store.ErrExists
	}
	return nil
}

// ClientKey implements store.ClientKeys.
func (s *Store) ClientKey(ctx context.Context, id string) (store.ClientKey, error) {
	ctx, cancel := s.cfgCtx(ctx)
	defer cancel()
	b, err := s.rdb.HGet(ctx, s.keys.clientKeys(), id).Bytes()
	if errors.Is(err, redis.Nil) {
		return store.ClientKey{}, store.ErrNotFound
	}
	if err != nil {
		return store.ClientKey{}, unavailable("client key", err)
	}
	return decodeClientKey(id, b)
}

// ListClientKeys implements store.ClientKeys.
func (s *Store) ListClientKeys(ctx context.Context) ([]store.ClientKey, error) {
	ctx, cancel := s.cfgCtx(ctx)
	defer cancel()
	all, err := s.rdb.HGetAll(ctx, s.keys.clientKeys()).Result()
	if err != nil {
		return nil, unavailable("list client keys", err)
	}
	out := make([]store.ClientKey, 0, len(all))
	for id, v := range all {
		k, err := decodeClientKey(id, []byte(v))
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// DeleteClientKey implements store.ClientKeys: HDEL and the revocation's PUBLISH in one
// MULTI, so no key is gone without its announcement being sent (an id published for a key
// that did not exist only makes caches drop nothing).
func (s *Store) DeleteClientKey(ctx context.Context, id string) error {
	ctx, cancel := s.cfgCtx(ctx)
	defer cancel()
	var del *redis.IntCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		del = p.HDel(ctx, s.keys.clientKeys(), id)
		if s.opts.publish {
			p.Publish(ctx, s.keys.revokedChannel(), id)
		}
		return nil
	})
	if err != nil {
		return unavailable("delete client key", err)
	}
	if del.Val() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// WatchRevocations implements store.ClientKeys by pub/sub on the revocation channel. The
// first call starts one subscriber per Store (go-redis resubscribes after a reconnect); ids
// published while it was down are lost, which the interface allows.
func (s *Store) WatchRevocations(ctx context.Context) <-chan string {
	s.revokeOnce.Do(func() {
		ps := s.rdb.Subscribe(s.bg, s.keys.revokedChannel())
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { _ = ps.Close() }()
			msgs := ps.Channel()
			for {
				select {
				case <-s.bg.Done():
					return
				case m, ok := <-msgs:
					if !ok {
						return
					}
					s.revoked.Notify(m.Payload)
				}
			}
		}()
	})
	return s.revoked.Add(ctx)
}

func decodeClientKey(id string, b []byte) (store.ClientKey, error) {
	var r clientKeyRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return store.ClientKey{}, fmt.Errorf("redisstore: client key %q: %w", id, err)
	}
	return store.ClientKey{ID: id, Name: r.Name, Hash: r.Hash, Models: r.Models, CreatedAt: r.CreatedAt}, nil
}
