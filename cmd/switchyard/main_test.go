package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/internal/redistest"
)

// syncBuffer is a log sink safe for the server goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// instance is a switchyard started by run().
type instance struct {
	addr   string
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error
}

// start runs switchyard with args (plus a free admin port) until the test ends or stop.
func start(t *testing.T, args ...string) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{logs: &syncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	ready := make(chan string, 1)
	env := map[string]string{"SWITCHYARD_MASTER_KEY": "test-master-key"}
	go func() {
		in.done <- run(ctx, append(args, "-admin-listen", "127.0.0.1:0"), func(k string) string { return env[k] }, in.logs, ready)
	}()
	select {
	case in.addr = <-ready:
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

func (in *instance) get(t *testing.T, path, key string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+in.addr+path, nil)
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
	in.stop(t)
	// No secret of the example config reaches the logs.
	for _, secret := range []string{"sk-example-not-a-real-key", "example-azure-key", "sk-ant-example", "test-master-key"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("logs contain a secret (%s)", secret)
		}
	}
}

var redisServer redistest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	redisServer.Close()
	os.Exit(code)
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
// configuration file and says so, and its readiness reports the outage without failing.
func TestRedisDownAtStartup(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	in := start(t, "-config", writeConfig(t, "x1"), "-store", "redis", "-redis-addrs", srv.Addr(), "-redis-prefix", redistest.Prefix(t))
	code, body := in.get(t, "/v1/models/m/deployments", "test-master-key")
	if data, _ := body["data"].([]any); code != http.StatusOK || len(data) != 1 {
		t.Fatalf("with Redis down: %d %v, want the file's deployment", code, body)
	}
	if !strings.Contains(in.logs.String(), "starting on the configuration file") {
		t.Fatalf("no warning about the unreachable store:\n%s", in.logs)
	}
}
