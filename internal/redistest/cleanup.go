package redistest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// DeletePrefix removes every key under prefix through c — a single server, a Sentinel's
// master or every master of a Cluster — so a test's keys do not outlive it on a shared
// server. A failure is logged, not fatal: the keys are only clutter.
func DeletePrefix(tb testing.TB, c redis.UniversalClient, prefix string) {
	ctx := context.Background()
	clean := func(ctx context.Context, node redis.UniversalClient) error {
		var keys []string
		iter := node.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		for _, k := range keys { // one by one: on a Cluster they span slots
			if err := node.Del(ctx, k).Err(); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return clean(ctx, node) })
	} else {
		err = clean(ctx, c)
	}
	if err != nil {
		tb.Logf("cleaning up test keys: %v", err)
	}
}
