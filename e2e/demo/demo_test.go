package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/internal/testlog"
)

// TestDemo runs the demo as `make demo` does (switchyard built from source and run as a
// child, envoysim on envoy/envoy.yaml fed by switchyard's xDS, the three fakes) on free
// ports, sends requests through the gateway with the official openai-go SDK — an answer
// from the cheap OpenAI deployment, a failover to Azure on the fault header, a fallback to
// gpt-4o-mini when both gpt-4o deployments fail, the model list — and stops it, after which
// every port it held is free again.
func TestDemo(t *testing.T) {
	free := "127.0.0.1:0"
	args := []string{"-config", "../../examples/demo.json", "-envoy-config", "../../envoy/envoy.yaml",
		"-listen", free, "-envoy-admin", free, "-extproc-listen", free, "-trampoline-listen", free,
		"-xds-listen", free, "-admin-listen", free, "-operator-listen", free, "-openai-listen", free, "-azure-listen", free, "-anthropic-listen", free}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var out, errOut testlog.Buffer
	ready := make(chan addrs, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, &out, &errOut, ready) }()

	var a addrs
	// Building switchyard on a cold cache is the slow part; the rest takes a second.
	select {
	case a = <-ready:
	case err := <-done:
		t.Fatalf("the demo ended before it was ready: %v\n%s", err, errOut.String())
	case <-time.After(3 * time.Minute):
		t.Fatalf("the demo was not ready in time:\n%s", errOut.String())
	}
	for _, want := range []string{"http://" + a.Gateway, "x-fake-fault: server=openai; status=500", "x-unified-routing-metadata: true",
		"http://" + a.OpenAI + fakeprovider.RequestsPath,
		"$GW/v1/models", "operator http://" + a.Switchyard.Operator + " (/healthz", "Authorization: Bearer " + masterKey, "/admin/deployments/openai-gpt4o/disable", `"routingStrategy":"simple-shuffle"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the instructions lack %q:\n%s", want, out.String())
		}
	}

	reqCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	client := func(opts ...option.RequestOption) openai.Client {
		// No client key configured: the demo trusts loopback; the SDK needs some key.
		return openai.NewClient(append([]option.RequestOption{option.WithBaseURL("http://" + a.Gateway + "/v1/"),
			option.WithAPIKey("unused"), option.WithMaxRetries(0)}, opts...)...)
	}
	chat := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	for _, tc := range []struct {
		name, fault, text, model string
	}{
		{"price-based picks the cheap OpenAI deployment", "", "Hello from the fake OpenAI.", "gpt-4o"},
		{"failover to Azure", "server=openai; status=500", "Hello from the fake Azure OpenAI.", "gpt-4o"},
		{"fallback to gpt-4o-mini", "model=gpt-4o; status=500", "Hello from the fake OpenAI.", "gpt-4o-mini"},
	} {
		var opts []option.RequestOption
		if tc.fault != "" {
			opts = append(opts, option.WithHeader(fakeprovider.FaultHeader, tc.fault))
		}
		c := client(opts...)
		res, err := c.Chat.Completions.New(reqCtx, chat)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := res.Choices[0].Message.Content; got != tc.text || res.Model != tc.model {
			t.Errorf("%s: answered %q by model %q, want %q by %q", tc.name, got, res.Model, tc.text, tc.model)
		}
	}
	// Black-box, as a user of the demo would: every request the fake OpenAI received (one
	// per scenario at least) carried switchyard's key for it.
	views := fakeRequests(t, a.OpenAI)
	if len(views) < 3 {
		t.Fatalf("the fake OpenAI received %d requests, want one per scenario at least: %+v", len(views), views)
	}
	for _, v := range views {
		if auth := v.Header["Authorization"]; len(auth) != 1 || auth[0] != "Bearer "+fakeKeys[openaiFake] || v.Path != "/v1/chat/completions" {
			t.Errorf("the fake OpenAI received %s %s with authorization %q", v.Method, v.Path, auth)
		}
	}
	c := client()
	models, err := c.Models.List(reqCtx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "claude-sonnet,gpt-4o,gpt-4o-mini" {
		t.Errorf("GET /v1/models: %v", ids)
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the demo stopped with %v\n%s", err, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the demo did not stop")
	}
	for _, addr := range []string{a.Gateway, a.EnvoyAdmin, a.OpenAI, a.Azure, a.Anthropic,
		a.Switchyard.Admin, a.Switchyard.Operator, a.Switchyard.Extproc, a.Switchyard.Trampoline, a.Switchyard.XDS} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s is still held after the demo stopped: %v", addr, err)
			continue
		}
		_ = ln.Close()
	}
}

// fakeRequests lists what the fake at addr received, over its HTTP endpoint.
func fakeRequests(t *testing.T, addr string) []fakeprovider.RequestView {
	t.Helper()
	resp, err := http.Get("http://" + addr + fakeprovider.RequestsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []fakeprovider.RequestView
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", fakeprovider.RequestsPath, resp.StatusCode, err)
	}
	return out
}
