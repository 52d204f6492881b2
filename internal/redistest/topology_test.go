package redistest_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/internal/redistest"
)

var cluster redistest.SharedCluster

func TestMain(m *testing.M) {
	code := m.Run()
	cluster.Close()
	sentinel.Close()
	os.Exit(code)
}

// TestClusterServesEverySlot: the helper's cluster has three masters that together own all
// 16384 slots, and keys of different slots land on different nodes.
func TestClusterServesEverySlot(t *testing.T) {
	addrs := cluster.Addrs(t)
	if len(addrs) != 3 {
		t.Fatalf("cluster of %d nodes, want 3", len(addrs))
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs[:1], MaxRetries: -1})
	defer c.Close()
	ctx := t.Context()
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	owned, masters := int64(0), map[string]bool{}
	for _, s := range shards {
		for _, r := range s.Slots {
			owned += r.End - r.Start + 1
		}
		for _, n := range s.Nodes {
			if n.Role == "master" && len(s.Slots) > 0 {
				masters[n.ID] = true
			}
		}
	}
	if owned != 16384 || len(masters) != 3 {
		t.Fatalf("%d slots over %d masters, want 16384 over 3", owned, len(masters))
	}
	for i := range 30 {
		if err := c.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// A standalone client on one node cannot MGET across slots: the reason the store's read
	// path follows the topology.
	one := redis.NewClient(&redis.Options{Addr: addrs[0], MaxRetries: -1})
	defer one.Close()
	if err := one.MGet(ctx, "k1", "k2", "k3", "k4").Err(); err == nil {
		t.Fatal("MGET across slots on one node succeeded; expected CROSSSLOT or MOVED")
	}
}

var sentinel redistest.SharedSentinel

// TestSentinelNamesTheMaster: a failover client finds the master through the helper's
// Sentinel and writes to it.
func TestSentinelNamesTheMaster(t *testing.T) {
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: redistest.SentinelMaster,
		SentinelAddrs: sentinel.Addrs(t), MaxRetries: -1})
	defer c.Close()
	if err := c.Set(t.Context(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if role, err := c.Do(t.Context(), "ROLE").Slice(); err != nil || role[0] != "master" {
		t.Fatalf("ROLE = %v, %v; want the master", role, err)
	}
}
