package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/internal/testlog"
)

// TestDataPlaneRefusesToStartWithoutClientAuth: with neither -client-auth keys nor envoy the
// gateway would be an open proxy for its provider keys; switchyard says so and stops.
func TestDataPlaneRefusesToStartWithoutClientAuth(t *testing.T) {
	for _, args := range [][]string{{}, {"-client-auth", "none"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var logs testlog.Buffer
		err := run(ctx, append([]string{"-config", writeConfig(t, "r1"), "-admin-listen", "127.0.0.1:0", "-operator-listen", "127.0.0.1:0",
			"-extproc-listen", "127.0.0.1:0", "-trampoline-listen", "127.0.0.1:0", "-xds-listen", ""}, args...),
			func(string) string { return "" }, &logs, nil)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "-client-auth") {
			t.Fatalf("%v: err %v, want a refusal naming -client-auth", args, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := run(ctx, []string{"-config", writeConfig(t, "r1")}, func(string) string { return "" }, &testlog.Buffer{}, nil)
	if want := "-client-auth is required: switchyard holds provider keys and must not be an open proxy"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err %v, want it to start with %q", err, want)
	}
}

// TestClientKeysThroughTheBinary: with -client-auth keys the binary checks client keys made
// through its admin API, in the store every replica shares.
func TestClientKeysThroughTheBinary(t *testing.T) {
	fake, err := fakeprovider.New(fakeprovider.Options{Kind: fakeprovider.OpenAI, APIKey: "sk-live-secret"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(fake)
	t.Cleanup(ts.Close)
	cfg := `{"deployments":[{"id":"live","publicModel":"gpt-4o","provider":"openai","baseUrl":"` + ts.URL + `","providerModel":"gpt-4o","apiKey":"sk-live-secret"}]}`
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	in := start(t, "-config", path, "-client-auth", "keys")
	ingress := behindEnvoy(t, in, map[string]string{"live": strings.TrimPrefix(ts.URL, "http://")})

	req, _ := http.NewRequest(http.MethodPost, "http://"+in.addr+"/admin/client-keys", strings.NewReader(`{"name":"ci"}`))
	req.Header.Set("Authorization", "Bearer test-master-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ Key string }
	_ = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || created.Key == "" {
		t.Fatalf("creating a client key: %d", resp.StatusCode)
	}
	chat := func(key string) int {
		req, _ := http.NewRequest(http.MethodPost, ingress+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := chat(""); code != http.StatusUnauthorized {
		t.Fatalf("without a key: %d, want 401", code)
	}
	if code := chat("sy-0000000000000000_nope"); code != http.StatusUnauthorized {
		t.Fatalf("wrong key: %d, want 401", code)
	}
	if code := chat(created.Key); code != http.StatusOK {
		t.Fatalf("created key: %d, want 200\n%s", code, in.logs)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("the provider got %d requests, want only the authorized one", n)
	}
	in.stop(t)
	if strings.Contains(in.logs.String(), created.Key) {
		t.Fatal("the client key reached the logs")
	}
}
