package redisstore_test

import (
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/internal/redistest"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

// redisServer is the one standalone Redis of this test binary, redisCluster its one real
// Redis Cluster (three masters); tests isolate themselves by key prefix.
var (
	redisServer   redistest.Shared
	redisCluster  redistest.SharedCluster
	redisSentinel redistest.SharedSentinel
)

func TestMain(m *testing.M) {
	code := m.Run()
	redisServer.Close()
	redisCluster.Close()
	redisSentinel.Close()
	os.Exit(code)
}

// target is a Redis topology the tests run on: one standalone server, a Cluster reached
// through a cluster client (with a single seed address, as -redis-mode cluster allows), or a
// master found through Sentinel.
type target struct {
	name    string
	addrs   []string
	cluster bool
	master  string // Sentinel master name; addrs are the Sentinels
}

func standaloneTarget(t testing.TB) target {
	return target{name: "standalone", addrs: []string{redisServer.Addr(t)}}
}

// clusterTarget shares one backing array of addresses between all its clients, as a binary
// may: under -race this also proves NewClient does not let go-redis append into it.
func clusterTarget(t testing.TB) target {
	return target{name: "cluster", addrs: redisCluster.Addrs(t)[:1], cluster: true}
}

func sentinelTarget(t testing.TB) target {
	return target{name: "sentinel", addrs: redisSentinel.Addrs(t), master: redistest.SentinelMaster}
}

// onEveryTopology runs fn on the standalone server, the Cluster and through Sentinel, as
// subtests.
func onEveryTopology(t *testing.T, fn func(t *testing.T, tg target)) {
	t.Run("standalone", func(t *testing.T) { fn(t, standaloneTarget(t)) })
	t.Run("cluster", func(t *testing.T) { fn(t, clusterTarget(t)) })
	t.Run("sentinel", func(t *testing.T) { fn(t, sentinelTarget(t)) })
}

// client opens a client of its own onto tg (see newClient).
func (tg target) client() redis.UniversalClient {
	return redisstore.NewClient(&redis.UniversalOptions{Addrs: tg.addrs, IsClusterMode: tg.cluster, MasterName: tg.master,
		DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, PoolTimeout: 5 * time.Second})
}

// sharedOn returns a key prefix of t's own on tg, whose keys are deleted when t ends.
func sharedOn(t testing.TB, tg target) (prefix string) {
	t.Helper()
	prefix = redistest.Prefix(t)
	t.Cleanup(func() {
		c := tg.client()
		defer c.Close()
		redistest.DeletePrefix(t, c, prefix)
	})
	return prefix
}

// newStoreOn opens a replica onto tg under prefix (see newStore).
func newStoreOn(t testing.TB, tg target, prefix string, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	base := []redisstore.Option{redisstore.WithPrefix(prefix), redisstore.WithOpTimeout(5 * time.Second)}
	s, err := redisstore.New(tg.client(), append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// shared returns the package's standalone server and a key prefix of t's own, whose keys are
// deleted when t ends: on a server given by REDIS_ADDR (shared with other runs) the durable
// config keys would otherwise accumulate.
func shared(t testing.TB) (addr, prefix string) {
	t.Helper()
	tg := standaloneTarget(t)
	return tg.addrs[0], sharedOn(t, tg)
}

// newClient opens a client of its own (its own connection pool), the way each gateway
// replica has one. Its socket timeouts are generous because this machine is shared and
// sometimes starved; the store's per-operation context deadline still bounds every call
// (NewClient enables ContextTimeoutEnabled), which is what the fault tests measure.
func newClient(addr string) redis.UniversalClient {
	return redisstore.NewClient(&redis.UniversalOptions{Addrs: []string{addr},
		DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, PoolTimeout: 5 * time.Second})
}

// newStore opens a replica onto the standalone server at addr under prefix. Its operation
// timeout is generous: 64 racing callers dialling fresh connections under -race on two cores
// can take longer than production's 250 ms, and these tests are about semantics, not latency
// (the fault tests set their own).
func newStore(t testing.TB, addr, prefix string, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	return newStoreOn(t, target{name: "standalone", addrs: []string{addr}}, prefix, opts...)
}
