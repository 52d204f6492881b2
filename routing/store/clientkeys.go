package store

import (
	"context"
	"errors"
	"time"
)

// ClientKeys persists the client API keys the route role accepts (a gateway that holds
// provider keys must not be an open proxy), shared by every replica. A store keeps a key's
// hash, never the key: whoever reads the store (a backup, a MONITOR) cannot call the gateway.
// Keys are not part of the configuration and have no version: a key works on every replica
// as soon as it is created; a deletion is announced to every replica (WatchRevocations), so
// one that caches verified keys drops it at once.
type ClientKeys interface {
	// CreateClientKey stores k; ErrExists if its id is taken.
	CreateClientKey(ctx context.Context, k ClientKey) error
	// ClientKey returns the key with id; ErrNotFound if there is none.
	ClientKey(ctx context.Context, id string) (ClientKey, error)
	// ListClientKeys returns every key, sorted by id.
	ListClientKeys(ctx context.Context) ([]ClientKey, error)
	// DeleteClientKey removes (revokes) a key; ErrNotFound if there is none.
	DeleteClientKey(ctx context.Context, id string) error
	// WatchRevocations delivers the id of every key deleted through any handle onto the
	// store, until ctx is done. Delivery is best effort (a pub/sub message lost while a
	// connection was down, a receiver that fell behind): a cache of verified keys must also
	// re-verify its entries within a bound of its own.
	WatchRevocations(ctx context.Context) <-chan string
}

// ClientKey is a client API key as stored.
type ClientKey struct {
	// ID is the key's public identifier (it is also part of the key itself, so the route
	// role finds the record without searching by hash).
	ID string
	// Name is the operator's label (a team, an application).
	Name string
	// Hash is the SHA-256 of the whole key.
	Hash []byte
	// Models is the allow-list of public models; empty allows every model.
	Models    []string
	CreatedAt time.Time
}

// ErrExists is returned when creating something whose id is taken.
var ErrExists = errors.New("already exists")
