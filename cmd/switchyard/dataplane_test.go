package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim"
	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/internal/testlog"
)

// TestDataPlaneThroughTheBinary: the binary's ext_proc server and trampoline, behind
// envoysim playing envoy/static-clusters.yaml.tmpl, route a chat request to a fake provider,
// and fail over a dead deployment through the trampoline.
func TestDataPlaneThroughTheBinary(t *testing.T) {
	fake, err := fakeprovider.New(fakeprovider.Options{Kind: fakeprovider.OpenAI, APIKey: "sk-live-secret"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(fake)
	t.Cleanup(ts.Close)
	dead := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}()
	live := strings.TrimPrefix(ts.URL, "http://")
	cfg := `{"routerSettings":{"routingStrategy":"price-based"},"deployments":[
	 {"id":"dead","publicModel":"gpt-4o","provider":"openai","baseUrl":"http://` + dead + `","providerModel":"gpt-4o","apiKey":"sk-dead","price":{"inputPerMillion":1,"outputPerMillion":1}},
	 {"id":"live","publicModel":"gpt-4o","provider":"openai","baseUrl":"` + ts.URL + `","providerModel":"gpt-4o","apiKey":"sk-live-secret","price":{"inputPerMillion":2,"outputPerMillion":2}}]}`
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	in := start(t, "-config", path)

	ingress := behindEnvoy(t, in, map[string]string{"dead": dead, "live": live})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ingress+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-client")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK || gjson.GetBytes(body.Bytes(), "choices.0.message.content").String() == "" {
		t.Fatalf("status %d body %s\n%s", resp.StatusCode, body.Bytes(), in.logs)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("the live deployment got %d requests", n)
	}
	if !strings.Contains(in.logs.String(), `"via":"trampoline"`) {
		t.Errorf("the dead deployment did not fail over through the trampoline:\n%s", in.logs)
	}
	for _, secret := range []string{"sk-live-secret", "sk-dead", "sk-client"} {
		if strings.Contains(in.logs.String(), secret) {
			t.Errorf("%s in the logs", secret)
		}
	}
}

// behindEnvoy puts envoysim, playing envoy/static-clusters.yaml.tmpl, in front of in's
// data plane with one static cluster per deployment (id → address); it returns the
// ingress's base URL.
func behindEnvoy(t *testing.T, in *instance, deps map[string]string) string {
	t.Helper()
	return behindEnvoyAcross(t, in, in, deps)
}

// behindEnvoyAcross is behindEnvoy with the route role (and trampoline) on one replica and
// the attempt role on another, so every request crosses both.
func behindEnvoyAcross(t *testing.T, in, attempt *instance, deps map[string]string) string {
	t.Helper()
	return behindEnvoyWith(t, in, attempt, deps, nil)
}

// behindEnvoyWith is behindEnvoyAcross with more template parameters (e.g. MaxRequestBody).
func behindEnvoyWith(t *testing.T, in, attempt *instance, deps map[string]string, params map[string]any) string {
	t.Helper()
	hp := func(addr string) map[string]any {
		h, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(p)
		return map[string]any{"Host": h, "Port": n, "ID": ""}
	}
	var eps []map[string]any
	for id, addr := range deps {
		m := hp(addr)
		m["ID"] = id
		eps = append(eps, m)
	}
	tmpl := template.Must(template.ParseFiles("../../envoy/static-clusters.yaml.tmpl"))
	var yaml bytes.Buffer
	data := map[string]any{
		"ListenPort": 0, "MaxRedirects": contract.DefaultMaxRedirects, "ConnectTimeout": "1s",
		"ExtProc": hp(in.extproc), "AttemptExtProc": hp(attempt.extproc), "AttemptCluster": "switchyard_extproc",
		"Trampoline": hp(in.trampoline), "Deployments": eps,
	}
	for k, v := range params {
		data[k] = v
	}
	if err := tmpl.Execute(&yaml, data); err != nil {
		t.Fatal(err)
	}
	bs, err := sim.Load(yaml.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(bs, sim.WithListenerAddress("ingress", "127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return "http://" + s.Addr("ingress")
}

// TestStateKeysRequiredWithASharedStore: replicas on Redis must share their state keys, so
// switchyard refuses to start without them; a lone memory-store replica makes its own.
func TestStateKeysRequiredWithASharedStore(t *testing.T) {
	in := startEnv(t, map[string]string{attemptstate.StateKeysEnv: ""}, "-config", writeConfig(t, "m1"))
	if !strings.Contains(in.logs.String(), "uses a key of its own") {
		t.Errorf("memory store without keys:\n%s", in.logs)
	}
	in.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var logs testlog.Buffer
	err := run(ctx, []string{"-config", writeConfig(t, "r1"), "-store", "redis", "-redis-addrs", redisServer.Addr(t),
		"-client-auth", "envoy", "-admin-listen", "127.0.0.1:0", "-operator-listen", "127.0.0.1:0", "-extproc-listen", "127.0.0.1:0", "-trampoline-listen", "127.0.0.1:0", "-xds-listen", ""},
		func(string) string { return "" }, &logs, nil)
	if err == nil || !strings.Contains(err.Error(), attemptstate.StateKeysEnv) {
		t.Fatalf("err %v, want a refusal naming %s", err, attemptstate.StateKeysEnv)
	}
}

// TestMaxAttemptsMustFitTheRedirectBudget: a maxAttempts above -max-internal-redirects would
// let a 307 reach a client; switchyard refuses it at startup.
func TestMaxAttemptsMustFitTheRedirectBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var logs testlog.Buffer
	err := run(ctx, []string{"-config", writeConfig(t, "r1"), "-max-internal-redirects", "2",
		"-client-auth", "envoy", "-admin-listen", "127.0.0.1:0", "-operator-listen", "127.0.0.1:0", "-extproc-listen", "127.0.0.1:0", "-trampoline-listen", "127.0.0.1:0", "-xds-listen", ""},
		func(string) string { return "" }, &logs, nil)
	if err == nil || !strings.Contains(err.Error(), "maxAttempts") {
		t.Fatalf("err %v, want the redirect budget refused", err)
	}
}

// TestAdminAPIChangesTheConfigurationInForce: a deployment created through the admin API is
// in the configuration the data plane routes on, without a restart.
func TestAdminAPIChangesTheConfigurationInForce(t *testing.T) {
	in := start(t, "-config", writeConfig(t, "a1"))
	body := `{"id":"a2","publicModel":"m","provider":"openai","baseUrl":"https://api.example.com","providerModel":"m","apiKey":"sk-a2-secret"}`
	req, _ := http.NewRequest(http.MethodPost, "http://"+in.addr+"/admin/deployments", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer test-master-key")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 || strings.Contains(out.String(), "sk-a2-secret") {
		t.Fatalf("create: %d %s", resp.StatusCode, out.String())
	}
	deadline := time.Now().Add(10 * time.Second)
	for in.live.Load().Deployments["a2"] == nil {
		if time.Now().After(deadline) {
			t.Fatal("the new deployment never reached the configuration in force")
		}
		time.Sleep(20 * time.Millisecond) // real I/O: the follower reloads from the store
	}
	if d := in.live.Load().Deployments["a2"]; d.APIKey != "sk-a2-secret" {
		t.Error("the new deployment's key did not reach the data plane")
	}
	if strings.Contains(in.logs.String(), "sk-a2-secret") {
		t.Error("the key was logged")
	}
}
