package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/internal/redistest"
)

// TestRedisModeNotGuessedFromAddresses: the topology is the -redis-mode, and flags that do
// not fit it are refused instead of silently picking another client.
func TestRedisModeNotGuessedFromAddresses(t *testing.T) {
	for _, c := range []struct {
		name    string
		f       storeFlags
		wantErr string
	}{
		{"standalone with two addresses", storeFlags{mode: "standalone", redisAddrs: "a:1,b:2"}, "takes one address"},
		{"master name without sentinel", storeFlags{mode: "standalone", redisAddrs: "a:1", masterName: "m"}, "-redis-mode sentinel"},
		{"sentinel without master name", storeFlags{mode: "sentinel", redisAddrs: "a:1"}, "needs -redis-master-name"},
		{"cluster with a database", storeFlags{mode: "cluster", redisAddrs: "a:1", db: 2}, "only database 0"},
		{"unknown mode", storeFlags{mode: "ring", redisAddrs: "a:1"}, "unknown mode"},
		{"no address", storeFlags{mode: "cluster"}, "needs -redis-addrs"},
		{"cert without key", storeFlags{mode: "standalone", redisAddrs: "a:1", tls: tlsFlags{cert: "c.pem"}}, "go together"},
	} {
		if _, err := redisOptions(c.f, redisEnv{}); err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.wantErr)
		}
	}
	o, err := redisOptions(storeFlags{mode: "cluster", redisAddrs: "n1:7000", username: "gw"}, redisEnv{password: "pw"})
	if err != nil || !o.IsClusterMode || len(o.Addrs) != 1 || o.Username != "gw" || o.Password != "pw" || o.TLSConfig != nil {
		t.Fatalf("one cluster address: %+v, %v; want the cluster client with the credentials, no TLS", o, err)
	}
	o, err = redisOptions(storeFlags{mode: "sentinel", redisAddrs: "s1:26379,s2:26379", masterName: "mymaster", db: 3,
		tls: tlsFlags{serverName: "redis.internal"}}, redisEnv{sentinelPassword: "spw"})
	if err != nil || o.MasterName != "mymaster" || o.DB != 3 || o.SentinelPassword != "spw" || o.TLSConfig == nil || o.TLSConfig.ServerName != "redis.internal" {
		t.Fatalf("sentinel: %+v, %v", o, err)
	}
}

// TestRedisClusterWithOneAddress runs switchyard with -redis-mode cluster and a single node
// address of a real three-master Cluster: it seeds the configuration, reads routing state
// across slots (a standalone client's MGET would fail with CROSSSLOT and degrade the store)
// and stays on shared state.
func TestRedisClusterWithOneAddress(t *testing.T) {
	addrs := redisCluster.Addrs(t)
	ids := []string{"c1", "c2", "c3", "c4", "c5", "c6"} // hash tags {d:c<n>} spread over the nodes
	in := start(t, "-config", writeConfig(t, ids...), "-store", "redis", "-redis-mode", "cluster",
		"-redis-addrs", addrs[0], "-redis-prefix", redistest.Prefix(t))
	if v := in.live.Load().Version; v < 1 {
		t.Fatalf("configuration version %d in force, want the seeded one", v)
	}
	assertKeys(t, in, ids...)
	for range 3 { // the report reads every deployment's state in one ReadStates
		code, body := in.get(t, "/v1/models/m/deployments", "test-master-key")
		if data, _ := body["data"].([]any); code != http.StatusOK || len(data) != len(ids) {
			t.Fatalf("deployments: %d %v", code, body)
		}
	}
	code, body := in.get(t, "/readyz", "")
	if detail := body["checks"]; code != http.StatusOK || !strings.Contains(jsonString(detail), "redis cluster") ||
		strings.Contains(jsonString(detail), "unreachable") {
		t.Fatalf("/readyz = %d %v: want the cluster, not degraded", code, body)
	}
	if strings.Contains(in.logs.String(), "redis unreachable") || strings.Contains(in.logs.String(), "CROSSSLOT") {
		t.Fatalf("the store degraded on a healthy cluster:\n%s", in.logs)
	}
}

// TestRedisClientLogsAreStructured: go-redis's own log lines (here a Sentinel that does not
// answer) reach the JSON log stream as structured records, not plain text.
func TestRedisClientLogsAreStructured(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop() // a port nothing listens on
	in := start(t, "-config", writeConfig(t, "s1"), "-store", "redis", "-redis-mode", "sentinel",
		"-redis-master-name", "mymaster", "-redis-addrs", srv.Addr(), "-redis-prefix", redistest.Prefix(t))
	eventually(t, 10*time.Second, "a go-redis log record", func() bool {
		return strings.Contains(in.logs.String(), `"component":"go-redis"`)
	})
	in.stop(t)
	sawSentinel := false
	for _, line := range strings.Split(strings.TrimSpace(in.logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec["component"] == "go-redis" {
			if rec["level"] != "WARN" || rec["msg"] == "" {
				t.Fatalf("go-redis record %v", rec)
			}
			sawSentinel = sawSentinel || strings.Contains(rec["msg"].(string), "sentinel")
		}
	}
	if !sawSentinel {
		t.Fatalf("no go-redis record about the Sentinel:\n%s", in.logs)
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestRedisThroughSentinel runs switchyard with -redis-mode sentinel against a real
// Sentinel: it finds the master, seeds it and routes on shared state.
func TestRedisThroughSentinel(t *testing.T) {
	sentinels := redisSentinel.Addrs(t)
	in := start(t, "-config", writeConfig(t, "s1", "s2"), "-store", "redis", "-redis-mode", "sentinel",
		"-redis-master-name", redistest.SentinelMaster, "-redis-addrs", strings.Join(sentinels, ","),
		"-redis-prefix", redistest.Prefix(t))
	if v := in.live.Load().Version; v < 1 {
		t.Fatalf("configuration version %d in force, want the seeded one", v)
	}
	assertKeys(t, in, "s1", "s2")
	code, body := in.get(t, "/readyz", "")
	if detail := jsonString(body["checks"]); code != http.StatusOK || !strings.Contains(detail, "redis sentinel") ||
		strings.Contains(detail, "unreachable") {
		t.Fatalf("/readyz = %d %v: want Sentinel, not degraded", code, body)
	}
}
