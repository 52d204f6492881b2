package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/switchyard-gw/switchyard/internal/testlog"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/internal/redistest"
	"github.com/switchyard-gw/switchyard/routing/config"
)

// instance is a switchyard started by run().
type instance struct {
	addr     string // the admin listener
	operator string // the operator listener
	// extproc and trampoline are the data plane's listeners.
	extproc, trampoline, xds string
	live                     *config.Live // the configuration in force
	logs                     *testlog.Buffer
	cancel                   context.CancelFunc
	done                     chan error
}

// testStateKey is an attempt-state key (base64 of 32 bytes).
const testStateKey = "c3dpdGNoeWFyZC10ZXN0LXN0YXRlLWtleS0zMi1ieXQ="

// start runs switchyard with args (plus free ports) until the test ends or stop.
func start(t *testing.T, args ...string) *instance {
	return startEnv(t, nil, args...)
}

// startEnv is start with extra environment (an empty value unsets a default).
func startEnv(t *testing.T, extra map[string]string, args ...string) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{logs: &testlog.Buffer{}, cancel: cancel, done: make(chan error, 1)}
	ready := make(chan started, 1)
	env := map[string]string{"SWITCHYARD_MASTER_KEY": "test-master-key", attemptstate.StateKeysEnv: testStateKey}
	for k, v := range extra {
		env[k] = v
	}
	go func() {
		in.done <- run(ctx, append(append([]string{"-client-auth", "envoy"}, args...), "-admin-listen", "127.0.0.1:0", "-operator-listen", "127.0.0.1:0", "-extproc-listen", "127.0.0.1:0", "-trampoline-listen", "127.0.0.1:0", "-xds-listen", "127.0.0.1:0"), func(k string) string { return env[k] }, in.logs, ready)
	}()
	select {
	case st := <-ready:
		in.addr, in.operator, in.live, in.extproc, in.trampoline, in.xds = st.addr, st.operator, st.live, st.extproc, st.trampoline, st.xds
	case err := <-in.done:
		t.Fatalf("switchyard exited: %v\n%s", err, in.logs)
	case <-time.After(30 * time.Second):
		t.Fatal("switchyard did not start")
	}
	t.Cleanup(func() { in.stop(t) })
	return in
}

func (in *instance) stop(t *testing.T) {
	t.Helper()
	if in.cancel == nil {
		return
	}
	in.cancel()
	in.cancel = nil
	if err := <-in.done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

// get asks the operator listener for /healthz, /readyz and /metrics, the admin listener for
// the rest.
func (in *instance) get(t *testing.T, path, key string) (int, map[string]any) {
	t.Helper()
	addr := in.addr
	switch path {
	case "/healthz", "/readyz", "/metrics":
		addr = in.operator
	}
	return in.getAt(t, addr, path, key)
}

func (in *instance) getAt(t *testing.T, addr, path, key string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// TestRunWithExampleConfig starts switchyard exactly as the README's first command does
// (the example config, the in-memory store) and asks its endpoints.
func TestRunWithExampleConfig(t *testing.T) {
	in := start(t, "-config", "../../examples/switchyard.json")
	logs := in.logs
	get := func(path, key string) (int, map[string]any) { return in.get(t, path, key) }
	if code, body := get("/readyz", ""); code != http.StatusOK || body["ready"] != true {
		t.Fatalf("/readyz = %d %v", code, body)
	}
	if code, _ := get("/v1/models/gpt-4o/deployments", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("wrong master key: %d, want 401", code)
	}
	code, body := get("/v1/models/gpt-4o/deployments", "test-master-key")
	if code != http.StatusOK {
		t.Fatalf("deployments status: %d %v", code, body)
	}
	data, _ := body["data"].([]any)
	if len(data) != 2 {
		t.Fatalf("gpt-4o has %d deployments in the report, want 2: %v", len(data), body)
	}
	for _, d := range data {
		if m := d.(map[string]any); m["state"] != "available" || m["retry_after_ms"] != float64(0) {
			t.Fatalf("fresh deployment reported as %v", m)
		}
	}
	if code, _ := get("/v1/models/nope/deployments", "test-master-key"); code != http.StatusNotFound {
		t.Fatalf("unknown model: %d, want 404", code)
	}
	if code, _ := get("/metrics", ""); code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	// The binary registers the deployments' live-state gauges.
	mresp, err := http.Get("http://" + in.operator + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mbody, _ := io.ReadAll(mresp.Body)
	_ = mresp.Body.Close()
	for _, d := range data {
		id := d.(map[string]any)["id"].(string)
		for _, series := range []string{
			`switchyard_deployment_circuit_state{state="closed",switchyard_deployment="` + id + `"} 1`,
			`switchyard_deployment_attempts_in_flight{switchyard_deployment="` + id + `"} 0`,
		} {
			if !strings.Contains(string(mbody), series) {
				t.Fatalf("/metrics lacks %s:\n%s", series, mbody)
			}
		}
	}
	// The listeners are split: the operator one shows no routing state, the admin one
	// serves nothing without the master key.
	if code, _ := in.getAt(t, in.operator, "/v1/models/gpt-4o/deployments", "test-master-key"); code != http.StatusNotFound {
		t.Fatalf("status view on the operator listener: %d, want 404", code)
	}
	if code, _ := in.getAt(t, in.addr, "/readyz", ""); code != http.StatusUnauthorized {
		t.Fatalf("/readyz on the admin listener without a key: %d, want 401", code)
	}
	if code, body := get("/v1/models", "test-master-key"); code != http.StatusOK || len(body["data"].([]any)) != 3 {
		t.Fatalf("GET /v1/models on the admin listener: %d %v", code, body)
	}
	in.stop(t)
	// No secret of the example config reaches the logs.
	for _, secret := range []string{"sk-example-not-a-real-key", "example-azure-key", "sk-ant-example", "test-master-key"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("logs contain a secret (%s)", secret)
		}
	}
}

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

// eventually polls cond until it holds or the deadline passes (the replica works in its own
// goroutines against a real Redis).
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond) // polling real I/O with a deadline
	}
}

// assertKeys fails unless every id is in force with the key writeConfig gave it.
func assertKeys(t *testing.T, in *instance, ids ...string) {
	t.Helper()
	snap := in.live.Load()
	for _, id := range ids {
		d := snap.Deployments[id]
		if d == nil || d.APIKey != "sk-"+id+"-secret" {
			has := d != nil
			t.Fatalf("deployment %s: in force %v, without the key of the file", id, has)
		}
	}
}

// writeConfig writes a configuration file with one deployment per id, all of model m.
func writeConfig(t *testing.T, ids ...string) string {
	t.Helper()
	var deps []string
	for _, id := range ids {
		deps = append(deps, `{"id":"`+id+`","publicModel":"m","provider":"openai","baseUrl":"https://api.example.com","providerModel":"m","apiKey":"sk-`+id+`-secret"}`)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(`{"deployments":[`+strings.Join(deps, ",")+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRedisReplicasShareConfiguration runs two replicas on one Redis: the first seeds the
// shared configuration from its file; the second, started with another file, keeps the
// shared one instead of rolling it back.
func TestRedisReplicasShareConfiguration(t *testing.T) {
	addr := redisServer.Addr(t)
	prefix := redistest.Prefix(t)
	common := []string{"-store", "redis", "-redis-addrs", addr, "-redis-prefix", prefix}
	a := start(t, append([]string{"-config", writeConfig(t, "a1", "a2")}, common...)...)
	b := start(t, append([]string{"-config", writeConfig(t, "b1")}, common...)...)
	for _, in := range []*instance{a, b} {
		code, body := in.get(t, "/v1/models/m/deployments", "test-master-key")
		data, _ := body["data"].([]any)
		if code != http.StatusOK || len(data) != 2 {
			t.Fatalf("replica sees %d %v, want the 2 deployments a seeded", code, body)
		}
		code, body = in.get(t, "/readyz", "")
		if code != http.StatusOK || !strings.Contains(fmt.Sprint(body["checks"]), "redis") {
			t.Fatalf("/readyz = %d %v", code, body)
		}
	}
	if !strings.Contains(b.logs.String(), "already holds a configuration") {
		t.Fatalf("the second replica did not say why it ignored its file:\n%s", b.logs)
	}
	for _, in := range []*instance{a, b} {
		if strings.Contains(in.logs.String(), "-secret") {
			t.Fatal("a provider key reached the logs")
		}
	}
}

// TestRedisDownAtStartup starts a replica whose Redis does not answer: it routes on its
// configuration file, provider keys included, and says so. When Redis comes back empty the
// replica seeds it from its file, as a normal start would, and follows it.
func TestRedisDownAtStartup(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	prefix := redistest.Prefix(t)
	in := start(t, "-config", writeConfig(t, "x1", "x2"), "-store", "redis", "-redis-addrs", srv.Addr(), "-redis-prefix", prefix)
	code, body := in.get(t, "/v1/models/m/deployments", "test-master-key")
	if data, _ := body["data"].([]any); code != http.StatusOK || len(data) != 2 {
		t.Fatalf("with Redis down: %d %v, want the file's deployments", code, body)
	}
	assertKeys(t, in, "x1", "x2")
	if !strings.Contains(in.logs.String(), "starting on the configuration file") {
		t.Fatalf("no warning about the unreachable store:\n%s", in.logs)
	}

	srv.Restart()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer c.Close()
	eventually(t, 20*time.Second, "Redis seeded from the file", func() bool {
		n, err := c.HLen(t.Context(), prefix+"{cfg}:deployments").Result()
		return err == nil && n == 2
	})
	if key, err := c.HGet(t.Context(), prefix+"{cfg}:secrets", "x1").Result(); err != nil || key != "sk-x1-secret" {
		t.Fatalf("seeded secret of x1 = %q, %v", key, err)
	}
	eventually(t, 20*time.Second, "the replica on the seeded version", func() bool { return in.live.Load().Version >= 1 })
	assertKeys(t, in, "x1", "x2")
}

// TestRedisBackWithConfigurationIsNotOverwritten: a replica that started without Redis
// must not seed a Redis that comes back holding a configuration; it follows that one.
func TestRedisBackWithConfigurationIsNotOverwritten(t *testing.T) {
	srv := redistest.Start(t)
	prefix := redistest.Prefix(t)
	owner := start(t, "-config", writeConfig(t, "shared"), "-store", "redis", "-redis-addrs", srv.Addr(), "-redis-prefix", prefix)
	owner.stop(t)
	srv.Stop()
	in := start(t, "-config", writeConfig(t, "mine"), "-store", "redis", "-redis-addrs", srv.Addr(), "-redis-prefix", prefix)
	assertKeys(t, in, "mine")
	srv.Restart()
	eventually(t, 20*time.Second, "the replica on Redis's configuration", func() bool {
		return in.live.Load().Deployments["shared"] != nil
	})
	assertKeys(t, in, "shared")
	if in.live.Load().Deployments["mine"] != nil {
		t.Fatal("the file's deployment survived")
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer c.Close()
	if ok, err := c.HExists(t.Context(), prefix+"{cfg}:deployments", "mine").Result(); err != nil || ok {
		t.Fatalf("the late replica seeded its file over the shared configuration (%v)", err)
	}
}
