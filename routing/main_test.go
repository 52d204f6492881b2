package routing_test

import (
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/internal/redistest"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

// redisServer is the one Redis of this test binary; tests isolate themselves by key prefix.
var redisServer redistest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	redisServer.Close()
	os.Exit(code)
}

// backends are the stores the state-dependent routing tests run on: the embedded memory
// store and a real Redis (skipped, loudly, only where no Redis can be had).
var backends = []struct {
	name string
	open func(t testing.TB) store.Store
}{
	{"memstore", func(testing.TB) store.Store { return memstore.New() }},
	{"redis", openRedis},
}

// onEachStore runs f once per backend with an env builder over that backend.
func onEachStore(t *testing.T, f func(t *testing.T, newEnv func(*configv1.Config, ...func(*routing.Options)) *env)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			f(t, func(cfg *configv1.Config, opts ...func(*routing.Options)) *env {
				return newEnvOn(t, b.open(t), cfg, opts...)
			})
		})
	}
}

// openRedis opens a store on the shared server under a prefix of t's own, whose keys are
// deleted when t ends.
func openRedis(t testing.TB) store.Store {
	t.Helper()
	addr, prefix := redisServer.Addr(t), redistest.Prefix(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second,
		WriteTimeout: 5 * time.Second, PoolTimeout: 5 * time.Second, ContextTimeoutEnabled: true})
	s, err := redisstore.New(rdb, redisstore.WithPrefix(prefix), redisstore.WithOpTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		redistest.DeletePrefix(t, c, prefix)
		_ = s.Close()
	})
	return s
}
