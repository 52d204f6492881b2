package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
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

// TestRunWithExampleConfig starts switchyard exactly as the README's first command does
// (the example config, the in-memory store) and asks its endpoints.
func TestRunWithExampleConfig(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	logs := &syncBuffer{}
	env := map[string]string{"SWITCHYARD_MASTER_KEY": "test-master-key"}
	go func() {
		done <- run(ctx, []string{"-config", "../../examples/switchyard.json", "-admin-listen", "127.0.0.1:0"}, func(k string) string { return env[k] }, logs, ready)
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("switchyard exited: %v\n%s", err, logs)
	case <-time.After(30 * time.Second):
		t.Fatal("switchyard did not start")
	}
	get := func(path, key string) (int, map[string]any) {
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
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	// No secret of the example config reaches the logs.
	for _, secret := range []string{"sk-example-not-a-real-key", "example-azure-key", "sk-ant-example", "test-master-key"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("logs contain a secret (%s)", secret)
		}
	}
}
