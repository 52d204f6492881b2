package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/internal/redistest"
)

// createKey makes a client key through in's admin API and returns its id and the key.
func createKey(t *testing.T, in *instance) (id, key string) {
	t.Helper()
	code, _, body := adminCall(t, in, "POST", "/admin/client-keys", `{"name":"test"}`)
	var created struct{ ID, Key string }
	if err := json.Unmarshal([]byte(body), &created); err != nil || code != http.StatusCreated || created.Key == "" {
		t.Fatalf("creating a client key: %d", code)
	}
	return created.ID, created.Key
}

// chatWith sends a chat request with key through ingress and returns the status and the
// error code of the answer ("" on success).
func chatWith(t *testing.T, ingress, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ingress+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, gjson.GetBytes(b, "error.code").String()
}

// TestClientKeysThroughARedisOutage: with -client-auth keys on Redis, two replicas keep
// serving the keys they verified while Redis is stopped (8 s used to refuse nearly every
// request), refuse keys they never verified with 503 auth_unavailable and malformed ones
// with 401, say so in /readyz while staying ready, and log the refusals a bounded number
// of times. A revocation reaches the other replica by the store's announcement (well within
// its one-minute cache age); one whose announcement is lost (deleted behind the API's
// back) stops working within -client-key-max-age.
func TestClientKeysThroughARedisOutage(t *testing.T) {
	fake, err := fakeprovider.New(fakeprovider.Options{Kind: fakeprovider.OpenAI, APIKey: "sk-live-secret"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(fake)
	t.Cleanup(ts.Close)
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(`{"deployments":[`+liveDeployment("live", ts.URL)+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t)
	prefix := redistest.Prefix(t)
	common := []string{"-config", path, "-store", "redis", "-redis-addrs", srv.Addr(), "-redis-prefix", prefix, "-client-auth", "keys"}
	a := start(t, append(common, "-client-key-max-age", "1s")...)
	b := start(t, append(common, "-client-key-max-age", "1m")...)
	deps := map[string]string{"live": strings.TrimPrefix(ts.URL, "http://")}
	viaA, viaB := behindEnvoy(t, a, deps), behindEnvoy(t, b, deps)

	_, known := createKey(t, a)
	_, fresh := createKey(t, a) // never used before the outage
	revokedID, revoked := createKey(t, a)
	lostID, lost := createKey(t, a)
	for _, c := range []struct {
		ingress, key string
	}{{viaA, known}, {viaB, known}, {viaB, revoked}, {viaA, lost}} {
		if code, errCode := chatWith(t, c.ingress, c.key); code != http.StatusOK {
			t.Fatalf("key before the outage: %d %s", code, errCode)
		}
	}

	// Revoked through the admin API on a: b, which caches it for a minute, drops it on the
	// announcement.
	if code, _, _ := adminCall(t, a, "DELETE", "/admin/client-keys/"+revokedID, ""); code != http.StatusNoContent {
		t.Fatalf("revoking: %d", code)
	}
	eventually(t, 5*time.Second, "the revocation reaching b", func() bool {
		code, _ := chatWith(t, viaB, revoked)
		return code == http.StatusUnauthorized
	})
	// Deleted behind the API's back (no announcement): a stops accepting it within its 1 s.
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer c.Close()
	if err := c.HDel(t.Context(), prefix+"{cfg}:clientkeys", lostID).Err(); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	eventually(t, 5*time.Second, "the unannounced revocation reaching a", func() bool {
		code, _ := chatWith(t, viaA, lost)
		return code == http.StatusUnauthorized
	})
	if took := time.Since(deleted); took > 2500*time.Millisecond { // 1 s and a slow machine's margin
		t.Fatalf("an unannounced revocation took %v on a replica with a 1 s max age", took)
	}

	srv.Stop()
	outage := time.Now()
	for time.Since(outage) < 3*time.Second { // three times a's max age
		for _, in := range []string{viaA, viaB} {
			if code, errCode := chatWith(t, in, known); code != http.StatusOK {
				t.Fatalf("known key %v into the outage: %d %s, want it served from the cache", time.Since(outage), code, errCode)
			}
			if code, errCode := chatWith(t, in, fresh); code != http.StatusServiceUnavailable || errCode != "auth_unavailable" {
				t.Fatalf("key never verified, Redis down: %d %s, want 503 auth_unavailable", code, errCode)
			}
			if code, _ := chatWith(t, in, "sy-not-a-key"); code != http.StatusUnauthorized {
				t.Fatalf("malformed key, Redis down: %d, want 401", code)
			}
		}
		// Revoked before the outage: no longer cached, so unknown to b now (503, never let
		// through).
		if code, _ := chatWith(t, viaB, revoked); code != http.StatusServiceUnavailable {
			t.Fatalf("revoked key during the outage: %d, want 503 like any key not cached", code)
		}
	}
	for _, in := range []*instance{a, b} {
		code, body := in.get(t, "/readyz", "")
		checks := jsonString(body["checks"])
		if code != http.StatusOK || !strings.Contains(checks, `"degraded":true`) || !strings.Contains(checks, "keep working from its cache") {
			t.Fatalf("/readyz during the outage: %d %v; want ready, the store degraded and the key cache named", code, body)
		}
		// Hundreds of refusals at one line per 10 s: one line (two on a machine slow enough
		// to stretch the loop past 10 s).
		if n, most := strings.Count(in.logs.String(), "client key check failed"), 1+int(time.Since(outage)/(10*time.Second)); n < 1 || n > most {
			t.Fatalf("%d log lines of failed key checks in %v of outage, want 1 to %d:\n%s", n, time.Since(outage), most, in.logs)
		}
	}
	if n := metric(t, a, `switchyard_client_key_lookups_total{outcome="stale"}`); n < 1 {
		t.Fatalf("no stale lookup counted on a (%v)", n)
	}

	srv.Restart()
	eventually(t, 20*time.Second, "a key never verified accepted once Redis is back", func() bool {
		code, _ := chatWith(t, viaA, fresh)
		return code == http.StatusOK
	})
	for _, in := range []*instance{a, b} {
		in.stop(t)
		for _, k := range []string{known, fresh, revoked, lost} {
			if strings.Contains(in.logs.String(), k) {
				t.Fatal("a client key reached the logs")
			}
		}
	}
}

// TestClientKeysOnTheMemoryStoreWarn: -client-auth keys with the memory store says once at
// start that the keys die with the process; with Redis, or without client keys, it does not.
func TestClientKeysOnTheMemoryStoreWarn(t *testing.T) {
	const warning = "client keys are kept in the memory store: they are lost when this process stops"
	in := start(t, "-config", writeConfig(t, "m1"), "-client-auth", "keys")
	in.stop(t)
	if n := strings.Count(in.logs.String(), warning); n != 1 || !strings.Contains(in.logs.String(), `"level":"WARN","msg":"`+warning) {
		t.Fatalf("%d warnings (want one WARN) in:\n%s", n, in.logs)
	}
	for _, args := range [][]string{
		{"-config", writeConfig(t, "m1")}, // -client-auth envoy
		{"-config", writeConfig(t, "r1"), "-client-auth", "keys", "-store", "redis", "-redis-addrs", redisServer.Addr(t), "-redis-prefix", redistest.Prefix(t)},
	} {
		in := start(t, args...)
		in.stop(t)
		if strings.Contains(in.logs.String(), warning) {
			t.Fatalf("%v: warned about the memory store", args)
		}
	}
}
