package admin_test

import (
	"context"
	"encoding/json"
	"github.com/switchyard-gw/switchyard/internal/testlog"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/admin"
	"github.com/switchyard-gw/switchyard/internal/redistest"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

// redisServer is the one Redis of this test binary; tests isolate themselves by key prefix.
var redisServer redistest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	redisServer.Close()
	os.Exit(code)
}

const masterKey = "mk-test-master"

// seedKey is the provider key of the seeded deployment: it must never appear in an answer
// or a log line.
const seedKey = "sk-seed-SECRET-0001"

// onEveryStore runs fn against the memory store and against real Redis. replica opens
// another handle onto the same shared state (the same store for memory; a separate client,
// another replica, for Redis).
func onEveryStore(t *testing.T, fn func(t *testing.T, replica func() store.Store)) {
	t.Run("memory", func(t *testing.T) {
		s := memstore.New()
		t.Cleanup(func() { _ = s.Close() })
		fn(t, func() store.Store { return s })
	})
	t.Run("redis", func(t *testing.T) {
		addr := redisServer.Addr(t)
		prefix := redistest.Prefix(t)
		t.Cleanup(func() { deletePrefix(t, addr, prefix) })
		fn(t, func() store.Store {
			rdb := redisstore.NewClient(&redis.UniversalOptions{Addrs: []string{addr}})
			s, err := redisstore.New(rdb, redisstore.WithPrefix(prefix), redisstore.WithOpTimeout(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		})
	})
}

// deletePrefix removes a test's keys (a server given by REDIS_ADDR outlives the run).
func deletePrefix(t *testing.T, addr, prefix string) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	redistest.DeletePrefix(t, c, prefix)
}

// env is an admin API on one replica and a router on another that follows the store, the
// way a second gateway replica picks changes up.
type env struct {
	t      *testing.T
	url    string
	st     store.Store // the API's replica
	live   *config.Live
	router *routing.Router // follows another replica
	logs   *testlog.Buffer
	// bodies are every answer's body, checked for secrets at the end.
	bodies []string
}

func seedConfig() *configv1.Config {
	return &configv1.Config{Deployments: []*configv1.Deployment{
		{Id: "seed", PublicModel: "gpt-4o", Provider: "openai", BaseUrl: "https://api.openai.com", ProviderModel: "gpt-4o", ApiKey: seedKey},
	}}
}

func newEnv(t *testing.T, replica func() store.Store) *env {
	t.Helper()
	v, err := config.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	st := replica()
	if _, err := st.ReplaceConfig(t.Context(), seedConfig()); err != nil {
		t.Fatal(err)
	}
	other := replica()
	live := config.NewLive(nil)
	if err := live.Reload(t.Context(), other, v); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		config.Follower{PollInterval: 50 * time.Millisecond}.Run(ctx, live, other, v)
	}()
	t.Cleanup(func() { cancel(); <-done })
	r := routing.New(live, other, routing.Options{})
	logs := &testlog.Buffer{}
	h, err := admin.NewAPI(admin.APIOptions{MasterKey: masterKey, Config: st, Validator: v, ClientKeys: st,
		Router: r, Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &env{t: t, url: srv.URL, st: st, live: live, router: r, logs: logs}
	t.Cleanup(e.checkNoSecrets)
	return e
}

// secrets are every provider key the tests send; none may leave the API.
var secrets = []string{seedKey, "sk-live-SECRET-0002", "sk-rotated-SECRET-0003"}

func (e *env) checkNoSecrets() {
	all := strings.Join(e.bodies, "\n")
	logs := e.logs.String()
	for _, s := range secrets {
		if strings.Contains(all, s) {
			e.t.Errorf("an answer carried provider key %q", s)
		}
		if strings.Contains(logs, s) {
			e.t.Errorf("the log carried provider key %q", s)
		}
	}
}

// do sends a request with the master key; headers come in name, value pairs.
func (e *env) do(method, path, body string, headers ...string) (*http.Response, []byte) {
	e.t.Helper()
	return e.doAs(masterKey, method, path, body, headers...)
}

func (e *env) doAs(key, method, path, body string, headers ...string) (*http.Response, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	e.bodies = append(e.bodies, string(b))
	return resp, b
}

// want sends a request and fails unless it answers status; it returns the decoded body.
func (e *env) want(status int, method, path, body string, headers ...string) (map[string]any, *http.Response) {
	e.t.Helper()
	resp, b := e.do(method, path, body, headers...)
	if resp.StatusCode != status {
		e.t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, status)
	}
	var out map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			e.t.Fatalf("%s %s: body %s: %v", method, path, b, err)
		}
	}
	return out, resp
}

// wantField fails unless the 400 answer names field (as its param or among its fields).
func (e *env) wantField(field, method, path, body string, headers ...string) {
	e.t.Helper()
	out, _ := e.want(http.StatusBadRequest, method, path, body, headers...)
	er, _ := out["error"].(map[string]any)
	if er["param"] == field {
		return
	}
	fields, _ := er["fields"].([]any)
	for _, f := range fields {
		if m, _ := f.(map[string]any); m["field"] == field {
			return
		}
	}
	e.t.Fatalf("%s %s %s: 400 %v does not name field %q", method, path, body, out, field)
}

// eventually polls cond until it holds or 10 s pass (the follower picks versions up through
// the store's notification).
func (e *env) eventually(what string, cond func(*config.Snapshot) bool) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond(e.live.Load()) {
		if time.Now().After(deadline) {
			e.t.Fatalf("the other replica never saw %s (version in force %d)", what, e.live.Load().Version)
		}
		time.Sleep(5 * time.Millisecond) // polling real I/O with a deadline
	}
}
