package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/internal/fakeclock"
	"github.com/switchyard-gw/switchyard/internal/redistest"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

// TestFollowerCatchesUpAfterFailedLoad: a replica is told of a new version once, but its
// LoadConfig fails then (here its ACL user may not read hashes, while it can still read the
// version and hear notifications). When loading works again the replica catches up on its
// own retry, with no further change or notification.
func TestFollowerCatchesUpAfterFailedLoad(t *testing.T) {
	srv := redistest.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer admin.Close()
	ctx := t.Context()
	if err := admin.Do(ctx, "ACL", "SETUSER", "replica", "on", ">pw", "~*", "&*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	prefix := redistest.Prefix(t)
	writer := newStore(t, srv.Addr(), prefix)
	reader, err := redisstore.New(redisstore.NewClient(&redis.UniversalOptions{Addrs: []string{srv.Addr()},
		Username: "replica", Password: "pw", ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}),
		redisstore.WithPrefix(prefix), redisstore.WithConfigPollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = writer.Close(); _ = reader.Close() })

	v, err := config.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.ReplaceConfig(ctx, &configv1.Config{Deployments: []*configv1.Deployment{testDeployment("a")}}); err != nil {
		t.Fatal(err)
	}
	live := &config.Live{}
	if err := live.Reload(ctx, reader, v); err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New(t0)
	fctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		config.Follower{Clock: clock, PollInterval: time.Hour, MinBackoff: time.Second}.Run(fctx, live, reader, v)
	}()
	t.Cleanup(func() { cancel(); <-done })
	waitSubscribed(t, reader)

	if err := admin.Do(ctx, "ACL", "SETUSER", "replica", "-hgetall").Err(); err != nil {
		t.Fatal(err)
	}
	v2, err := writer.ReplaceConfig(ctx, testConfig("a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	// The notification arrives, the load fails and a retry is scheduled on the clock (the
	// poll is the other timer).
	eventually(t, 5*time.Second, "a retry after the failed load", func() bool { return clock.Waiting() == 2 })
	if live.Load().Version == v2 {
		t.Fatal("loaded although the replica may not read the configuration")
	}
	if err := admin.Do(ctx, "ACL", "SETUSER", "replica", "+hgetall").Err(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	eventually(t, 5*time.Second, "the announced version in force", func() bool { return live.Load().Version == v2 })
	if live.Load().Deployments["b"] == nil || live.Load().Deployments["b"].APIKey != "sk-b" {
		t.Fatal("version in force without deployment b and its key")
	}
}
