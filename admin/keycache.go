package admin

import (
	clist "container/list"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// The verifier keeps the keys it verified, so the route role does not read the store on every
// request and, above all, so a store outage does not refuse every client: with client keys
// in Redis, an unreachable Redis used to answer 503 to nearly every request. The rules, which
// docs/admin-api.md and the README's Operations section repeat:
//
//   - A key read from the store is used from the cache for MaxAge (10 s by default) without
//     reading the store again; after that, the next request that presents it reads the store.
//   - A deletion is announced to every replica (store.ClientKeys.WatchRevocations) and drops
//     the key from the cache at once. An announcement can be lost (a pub/sub message while a
//     connection was down), so MaxAge is the bound: while the store is reachable, a revoked
//     key stops working on every replica within MaxAge of its deletion.
//   - While the store is unreachable, a cached key keeps working however old its entry is
//     (it was valid when last read, and no revocation reached us); the store is tried again
//     at most once per retryInterval per key, without holding requests beyond that.
//   - A key not in the cache must be read from the store: while the store is unreachable it is
//     refused (fail closed: 503 auth_unavailable), never let through.
//   - The cache holds at most MaxEntries keys, least recently used out first. It holds what the
//     store holds (the key's hash, never the key). Keys have no expiry of their own: an entry
//     lasts until its key is revoked, found gone at a re-verification, or evicted.

// Defaults of VerifierOptions.
const (
	DefaultKeyCacheMaxAge     = 10 * time.Second
	DefaultKeyCacheMaxEntries = 10000
	// retryInterval is how often a cached key whose re-verification failed (the store was
	// unreachable) tries the store again.
	retryInterval = time.Second
)

// Outcomes of VerifierOptions.Count: how a key lookup was answered.
const (
	KeyLookupCached      = "cached"      // fresh in the cache
	KeyLookupStore       = "store"       // read from the store (found or not)
	KeyLookupStale       = "stale"       // store unreachable: served from the cache
	KeyLookupUnavailable = "unavailable" // store unreachable and the key not cached: refused
)

// VerifierOptions configure a Verifier's cache. The zero value takes the defaults.
type VerifierOptions struct {
	// MaxAge is how long a verified key is used without reading the store (see above).
	MaxAge time.Duration
	// MaxEntries bounds the cache.
	MaxEntries int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Count is told the outcome of every lookup (KeyLookup*); nil counts nothing. The binary
	// turns it into switchyard_client_key_lookups_total{outcome}.
	Count func(outcome string)
}

// keyCache is the verified-key cache: an LRU list of entries by id.
type keyCache struct {
	opts    VerifierOptions
	revoked <-chan string

	mu      sync.Mutex
	lru     *clist.List // of *keyEntry, most recently used first
	entries map[string]*clist.Element
}

type keyEntry struct {
	key      store.ClientKey
	verified time.Time // when the store last returned it
	retryAt  time.Time // while the store is unreachable: next store read
}

func newKeyCache(ks store.ClientKeys, opts VerifierOptions) *keyCache {
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultKeyCacheMaxAge
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultKeyCacheMaxEntries
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Count == nil {
		opts.Count = func(string) {}
	}
	// The watch lives as long as the store: its channel closes when the store does.
	return &keyCache{opts: opts, revoked: ks.WatchRevocations(context.Background()),
		lru: clist.New(), entries: make(map[string]*clist.Element)}
}

// lookup returns the key with id from the cache or the store, under the rules above.
func (c *keyCache) lookup(ctx context.Context, ks store.ClientKeys, id string) (store.ClientKey, error) {
	now := c.opts.Now()
	c.mu.Lock()
	// Revocations are applied before every lookup, under the lock, so one announced before
	// this request cannot be missed by it (no goroutine holds an id between the channel and
	// the cache).
	c.drainLocked("")
	var cached *keyEntry
	if el := c.entries[id]; el != nil {
		c.lru.MoveToFront(el)
		cached = el.Value.(*keyEntry)
		if now.Sub(cached.verified) < c.opts.MaxAge || now.Before(cached.retryAt) {
			k := cached.key
			stale := now.Sub(cached.verified) >= c.opts.MaxAge
			c.mu.Unlock()
			if stale {
				c.opts.Count(KeyLookupStale)
			} else {
				c.opts.Count(KeyLookupCached)
			}
			return k, nil
		}
	}
	c.mu.Unlock()

	k, err := ks.ClientKey(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		c.opts.Count(KeyLookupStore)
		c.evict(id)
		return store.ClientKey{}, err
	case errors.Is(err, store.ErrUnavailable) && cached != nil:
		c.opts.Count(KeyLookupStale)
		c.mu.Lock()
		if el := c.entries[id]; el != nil && el.Value.(*keyEntry) == cached { // not revoked meanwhile
			cached.retryAt = now.Add(retryInterval)
			c.mu.Unlock()
			return cached.key, nil
		}
		c.mu.Unlock()
		return store.ClientKey{}, store.ErrNotFound
	case errors.Is(err, store.ErrUnavailable):
		c.opts.Count(KeyLookupUnavailable)
		return store.ClientKey{}, err
	case err != nil:
		return store.ClientKey{}, err
	}
	c.opts.Count(KeyLookupStore)
	c.put(k, now)
	return k, nil
}

// put caches k, verified at now, evicting the least recently used entry past MaxEntries.
func (c *keyCache) put(k store.ClientKey, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// A revocation that arrived while the store was read wins over the record read.
	if c.drainLocked(k.ID) {
		return
	}
	e := &keyEntry{key: k, verified: now}
	if el := c.entries[k.ID]; el != nil {
		el.Value = e
		c.lru.MoveToFront(el)
		return
	}
	c.entries[k.ID] = c.lru.PushFront(e)
	for c.lru.Len() > c.opts.MaxEntries {
		last := c.lru.Back()
		c.lru.Remove(last)
		delete(c.entries, last.Value.(*keyEntry).key.ID)
	}
}

func (c *keyCache) evict(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evictLocked(id)
}

func (c *keyCache) evictLocked(id string) {
	if el := c.entries[id]; el != nil {
		c.lru.Remove(el)
		delete(c.entries, id)
	}
}

// drainLocked applies the revocations announced so far and reports whether one was of id.
func (c *keyCache) drainLocked(id string) (seen bool) {
	for {
		select {
		case revoked, ok := <-c.revoked:
			if !ok {
				c.revoked = nil // the store closed; a nil channel never receives
				return seen
			}
			c.evictLocked(revoked)
			seen = seen || revoked == id
		default:
			return seen
		}
	}
}

// size is the number of cached keys (readiness detail).
func (c *keyCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
