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

func TestPrefixIsUniqueAndBraceFree(t *testing.T) {
	a, b := redistest.Prefix(t), redistest.Prefix(t)
	if a == b || strings.ContainsAny(a, "{}") || !strings.HasSuffix(a, ":") {
		t.Fatalf("prefixes %q and %q", a, b)
	}
}
