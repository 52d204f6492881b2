package redistest_test

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/internal/redistest"
)

// TestServerRestartKeepsDataAndPort: fault tests rely on Restart coming back on the same
// address with the data written before Stop.
func TestServerRestartKeepsDataAndPort(t *testing.T) {
	srv := redistest.Start(t)
	addr := srv.Addr()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx := t.Context()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered after Stop")
	}
	srv.Restart()
	if srv.Addr() != addr {
		t.Fatalf("address moved from %s to %s", addr, srv.Addr())
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("after Restart GET k = %q, %v; want the value written before Stop", v, err)
	}
}

// TestServerCrashRestartsEmpty: Crash then Restart is a Redis without persistence that
// restarted: same address, no keys, even after a Stop had saved a dump.
func TestServerCrashRestartsEmpty(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer c.Close()
	ctx := t.Context()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	srv.Stop() // saves a dump
	srv.Restart()
	srv.Crash()
	srv.Restart()
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("after Crash and Restart: %d keys, %v; want an empty server", n, err)
	}
}

func TestPrefixIsUniqueAndBraceFree(t *testing.T) {
	a, b := redistest.Prefix(t), redistest.Prefix(t)
	if a == b || strings.ContainsAny(a, "{}") || !strings.HasSuffix(a, ":") {
		t.Fatalf("prefixes %q and %q", a, b)
	}
}
