package redisstore_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
	"github.com/switchyard-gw/switchyard/routing/store/storetest"
)

// TestConformance holds the Redis store to the reference semantics: every replica is a
// separate client (connection pool) onto one server, sharing state only through Redis.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() store.Store {
		addr, prefix := shared(t)
		return func() store.Store { return newStore(t, addr, prefix) }
	})
}

// TestConformancePipelinedReads runs the suite with the read path of a Cluster client
// (pipelined GETs instead of one MGET), which a single-node test server would not select.
func TestConformancePipelinedReads(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() store.Store {
		addr, prefix := shared(t)
		return func() store.Store { return newStore(t, addr, prefix, redisstore.WithPipelinedReads()) }
	})
}

// TestConformanceCluster runs the suite on a real three-master Redis Cluster through a
// cluster client with one seed address: reads are per-node pipelines, every script runs on
// the node of its slot, and config notifications cross nodes.
func TestConformanceCluster(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() store.Store {
		tg := clusterTarget(t)
		prefix := sharedOn(t, tg)
		return func() store.Store { return newStoreOn(t, tg, prefix) }
	})
}

// TestConformanceSentinel runs the suite on a master found through a real Sentinel (a
// failover client: one node, so reads are one MGET).
func TestConformanceSentinel(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() store.Store {
		tg := sentinelTarget(t)
		prefix := sharedOn(t, tg)
		return func() store.Store { return newStoreOn(t, tg, prefix) }
	})
}

// TestConformanceResilient runs the suite through the degradation wrapper with Redis up:
// wrapping must not change a single transition.
func TestConformanceResilient(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() store.Store {
		addr, prefix := shared(t)
		return func() store.Store {
			r, err := redisstore.NewResilient(newStore(t, addr, prefix), redisstore.ResilientConfig{Registerer: prometheus.NewRegistry()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if st := r.Status(); st.Degraded {
					t.Errorf("wrapper degraded with Redis up: %s", st.LastError)
				}
			})
			return r
		}
	})
}
