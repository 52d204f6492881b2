package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/admin"
	"github.com/switchyard-gw/switchyard/internal/fakeclock"
	"github.com/switchyard-gw/switchyard/internal/redistest"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

// TestWritesRefusedWhileTheStoreIsBehind: a store that lost the configuration in force
// (version 3) refuses admin writes with a 503 in the admin API's error shape instead of
// building them on what is left; the refusal wakes the guard, which restores version 3, and
// the next write gets version 4. On Redis the store's keys are deleted under the replica
// (what a restart without persistence does); a memory store cannot lose its configuration
// on its own (one process holds it and serves from it), so a fresh one stands in for it.
func TestWritesRefusedWhileTheStoreIsBehind(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		served := memstore.New()
		testWritesRefusedWhileBehind(t, served, func() store.Store { return memstore.New() })
	})
	t.Run("redis", func(t *testing.T) {
		addr := redisServer.Addr(t)
		prefix := redistest.Prefix(t)
		t.Cleanup(func() { deletePrefix(t, addr, prefix) })
		open := func() store.Store {
			s, err := redisstore.New(redisstore.NewClient(&redis.UniversalOptions{Addrs: []string{addr}}), redisstore.WithPrefix(prefix))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}
		testWritesRefusedWhileBehind(t, open(), func() store.Store {
			deletePrefix(t, addr, prefix)
			return open()
		})
	})
}

// testWritesRefusedWhileBehind brings served to version 3, loads it into force, then runs
// the admin API on lose(), a store that lost it.
func testWritesRefusedWhileBehind(t *testing.T, served store.Store, lose func() store.Store) {
	v, err := config.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := served.ReplaceConfig(t.Context(), seedConfig()); err != nil {
			t.Fatal(err)
		}
	}
	live := config.NewLive(nil)
	if err := live.Reload(t.Context(), served, v); err != nil || live.Load().Version != 3 {
		t.Fatalf("in force: %v", err)
	}
	st := lose()
	clock := fakeclock.New(time.Unix(1000, 0)) // never advanced: only the refusal wakes the guard
	guard := config.NewGuard(live, st, config.GuardOptions{Clock: clock, PollInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); guard.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	api, err := admin.NewAPI(admin.APIOptions{MasterKey: masterKey, Config: st, Validator: v, Gate: guard})
	if err != nil {
		t.Fatal(err)
	}
	post := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/admin/deployments",
			strings.NewReader(`{"id":"new","publicModel":"gpt-4o","provider":"openai","baseUrl":"https://api.openai.com","providerModel":"gpt-4o"}`))
		req.Header.Set("Authorization", "Bearer "+masterKey)
		w := httptest.NewRecorder()
		api.ServeHTTP(w, req)
		return w
	}

	w := post()
	var body struct {
		Error struct {
			Message, Type, Code string
			Param               any
		}
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != http.StatusServiceUnavailable ||
		body.Error.Code != "config_store_behind" || body.Error.Type != "api_error" ||
		!strings.Contains(body.Error.Message, "holds version 0, this gateway serves version 3") {
		t.Fatalf("write on a store behind: %d %s, want 503 config_store_behind naming both versions", w.Code, w.Body)
	}
	if n, _ := st.ConfigVersion(t.Context()); n != 3 {
		// The refusal woke the guard; wait for its restore.
		deadline := time.Now().Add(10 * time.Second)
		for n != 3 {
			if time.Now().After(deadline) {
				t.Fatalf("store at version %d, want the served 3 restored", n)
			}
			time.Sleep(5 * time.Millisecond) // the guard's goroutine writes the store
			n, _ = st.ConfigVersion(t.Context())
		}
	}
	snap, err := st.LoadConfig(t.Context())
	if err != nil || len(snap.Config.GetDeployments()) != 1 || snap.Secrets["seed"] != seedKey {
		t.Fatalf("restored store: %v, %v (key kept: %v)", err, snap.Config, snap.Secrets["seed"] == seedKey)
	}
	if w := post(); w.Code != http.StatusCreated || w.Header().Get("ETag") != `"4"` {
		t.Fatalf("write after the restore: %d ETag %s %s, want 201 at version 4", w.Code, w.Header().Get("ETag"), w.Body)
	}
}
