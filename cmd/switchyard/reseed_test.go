package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/internal/redistest"
)

// adminCall sends an admin API request with the master key and returns the status, the
// ETag and the body.
func adminCall(t *testing.T, in *instance, method, path, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+in.addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer test-master-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("ETag"), string(b)
}

// metric sums the samples of a Prometheus series (name{labels}) on in's /metrics.
func metric(t *testing.T, in *instance, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + in.operator + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, m := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(series)+` (\S+)$`).FindAllStringSubmatch(string(b), -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		sum += v
	}
	return sum
}

// liveDeployment is a deployment of model gpt-4o on the fake provider at url.
func liveDeployment(id, url string) string {
	return `{"id":"` + id + `","publicModel":"gpt-4o","provider":"openai","baseUrl":"` + url +
		`","providerModel":"gpt-4o","apiKey":"sk-live-secret"}`
}

// TestRedisRestartedEmptyIsRestored: two replicas share a Redis that restarts empty (no
// persistence, same port) under traffic that crosses both replicas. No request fails; the
// replicas restore the configuration they serve, at its version, keys included, exactly
// once between them; the next admin write continues from that version, and no deployment is
// lost. Without the guard the store stays empty and the write would be version 1 of a
// configuration holding only the new deployment.
func TestRedisRestartedEmptyIsRestored(t *testing.T) {
	fake, err := fakeprovider.New(fakeprovider.Options{Kind: fakeprovider.OpenAI, APIKey: "sk-live-secret"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(fake)
	t.Cleanup(ts.Close)
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(`{"deployments":[`+liveDeployment("d1", ts.URL)+`,`+liveDeployment("d2", ts.URL)+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t)
	prefix := redistest.Prefix(t)
	common := []string{"-config", path, "-store", "redis", "-redis-addrs", srv.Addr(), "-redis-prefix", prefix}
	a := start(t, common...)
	b := start(t, common...)
	// The fleet moves on from the file: version 2, with a deployment the file does not have.
	if code, etag, body := adminCall(t, a, "POST", "/admin/deployments", liveDeployment("d3", ts.URL)); code != http.StatusCreated || etag != `"2"` {
		t.Fatalf("adding d3: %d %s %s", code, etag, body)
	}
	const served = 2
	for _, in := range []*instance{a, b} {
		eventually(t, 10*time.Second, "both replicas on version 2", func() bool { return in.live.Load().Version == served })
	}
	upstream := strings.TrimPrefix(ts.URL, "http://")
	deps := map[string]string{"d1": upstream, "d2": upstream, "d3": upstream}
	ingresses := []string{behindEnvoyAcross(t, a, b, deps), behindEnvoyAcross(t, b, a, deps)}

	// Traffic across both replicas until told to stop.
	var sent, failed atomic.Int64
	var firstFailure atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ingresses[(w+i)%2]+"/v1/chat/completions",
					strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
				resp, err := http.DefaultClient.Do(req)
				sent.Add(1)
				if err == nil {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d: %s", resp.StatusCode, body)
					}
				}
				cancel()
				if err != nil {
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	stopTraffic := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	t.Cleanup(stopTraffic)

	time.Sleep(300 * time.Millisecond) // traffic before the restart
	srv.Crash()
	time.Sleep(500 * time.Millisecond) // traffic while Redis is down
	srv.Restart()                      // empty, same port
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer c.Close()
	eventually(t, 20*time.Second, "the served configuration restored into Redis", func() bool {
		v, err := c.Get(t.Context(), prefix+"{cfg}:version").Uint64()
		return err == nil && v == served
	})
	if n, err := c.HLen(t.Context(), prefix+"{cfg}:deployments").Result(); err != nil || n != 3 {
		t.Fatalf("restored deployments: %d, %v; want d1, d2 and d3", n, err)
	}
	if key, err := c.HGet(t.Context(), prefix+"{cfg}:secrets", "d3").Result(); err != nil || key != "sk-live-secret" {
		t.Fatalf("restored key of d3 is not the served one (%v)", err)
	}
	time.Sleep(time.Second) // traffic on the restored store
	stopTraffic()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d requests failed across the restart; first: %v", n, sent.Load(), firstFailure.Load())
	}
	t.Logf("%d requests", sent.Load())
	if sent.Load() < 20 {
		t.Fatalf("only %d requests during the test", sent.Load())
	}

	restored := 0
	for _, in := range []*instance{a, b} {
		logs := in.logs.String()
		restored += strings.Count(logs, "restored by this replica")
		if n := strings.Count(logs, "configuration store lost the configuration in force"); n > 1 {
			t.Errorf("a replica logged the event %d times, want at most once", n)
		}
	}
	events := metric(t, a, `switchyard_config_store_events_total{event="restored"}`) +
		metric(t, b, `switchyard_config_store_events_total{event="restored"}`)
	behind := metric(t, a, `switchyard_config_store_events_total{event="behind"}`) +
		metric(t, b, `switchyard_config_store_events_total{event="behind"}`)
	if restored != 1 || events != 1 || behind < 1 {
		t.Fatalf("restores logged %d, counted %v (behind counted %v); want exactly one restore between the replicas", restored, events, behind)
	}

	// The next write builds on the served version, on either replica.
	code, etag, body := adminCall(t, b, "POST", "/admin/deployments", liveDeployment("d4", ts.URL))
	if code != http.StatusCreated || etag != `"3"` {
		t.Fatalf("write after the restore: %d ETag %s %s; want 201 at version 3", code, etag, body)
	}
	for _, in := range []*instance{a, b} {
		eventually(t, 10*time.Second, "both replicas on version 3", func() bool { return in.live.Load().Version == 3 })
		snap := in.live.Load()
		for _, id := range []string{"d1", "d2", "d3", "d4"} {
			if d := snap.Deployments[id]; d == nil || d.APIKey != "sk-live-secret" {
				t.Fatalf("deployment %s lost (or its key) after the restart", id)
			}
		}
	}
	for _, in := range []*instance{a, b} {
		in.stop(t)
		if strings.Contains(in.logs.String(), "sk-live-secret") {
			t.Fatal("a provider key reached the logs")
		}
	}
}
