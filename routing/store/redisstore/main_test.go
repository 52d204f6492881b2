package redisstore_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/internal/redistest"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

// redisServer is the one Redis of this test binary; tests isolate themselves by key prefix.
var redisServer redistest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	redisServer.Close()
	os.Exit(code)
}

// shared returns the package's server and a key prefix of t's own, whose keys are deleted
// when t ends: on a server given by REDIS_ADDR (shared with other runs) the durable config
// keys would otherwise accumulate.
func shared(t testing.TB) (addr, prefix string) {
	t.Helper()
	addr, prefix = redisServer.Addr(t), redistest.Prefix(t)
	t.Cleanup(func() {
		c := newClient(addr)
		defer c.Close()
		ctx := context.Background()
		var keys []string
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			if err := c.Del(ctx, keys...).Err(); err != nil {
				t.Logf("cleaning up %d test keys: %v", len(keys), err)
			}
		}
	})
	return addr, prefix
}

// newClient opens a client of its own (its own connection pool), the way each gateway
// replica has one. Its socket timeouts are generous because this machine is shared and
// sometimes starved; the store's per-operation context deadline still bounds every call
// (NewClient enables ContextTimeoutEnabled), which is what the fault tests measure.
func newClient(addr string) redis.UniversalClient {
	return redisstore.NewClient(&redis.UniversalOptions{Addrs: []string{addr},
		DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, PoolTimeout: 5 * time.Second})
}

// newStore opens a replica onto the shared server under prefix. Its operation timeout is
// generous: 64 racing callers dialling fresh connections under -race on two cores can take
// longer than production's 250 ms, and these tests are about semantics, not latency (the
// fault tests set their own).
func newStore(t testing.TB, addr, prefix string, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	base := []redisstore.Option{redisstore.WithPrefix(prefix), redisstore.WithOpTimeout(5 * time.Second)}
	s, err := redisstore.New(newClient(addr), append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
