package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
)

func TestRateLimitCoolsTheDomainAndServesElsewhere(t *testing.T) {
	g := startGateway(t, twoDeployments(deployment{}), gatewayOptions{settings: priceBased()})
	c := g.openai(option.WithHeader(fakeprovider.FaultHeader, "server=a; error=rate_limit; retry-after=30"))
	if _, err := c.Chat.Completions.New(ctxT(t), chat("gpt-4o")); err != nil {
		t.Fatal(err)
	}
	if got := g.served(); got["a"] != 1 || got["b"] != 1 {
		t.Fatalf("served %v", got)
	}
	// a's domain is cooling for 30 s: the next request goes straight to b, although a is
	// cheaper.
	if _, err := g.openai().Chat.Completions.New(ctxT(t), chat("gpt-4o")); err != nil {
		t.Fatal(err)
	}
	if got := g.served(); got["a"] != 1 || got["b"] != 2 {
		t.Errorf("served %v, want a skipped while rate limited", got)
	}
	if s := g.deploymentStatus(0, "gpt-4o", "a"); s.State != "rate_limited" || s.RetryAfterMs < 25_000 {
		t.Errorf("a: %+v", s)
	}
}

func TestUnauthorizedQuarantines(t *testing.T) {
	g := startGateway(t, twoDeployments(deployment{WrongKey: true}), gatewayOptions{settings: priceBased()})
	if _, err := g.openai().Chat.Completions.New(ctxT(t), chat("gpt-4o")); err != nil {
		t.Fatal(err)
	}
	if _, err := g.openai().Chat.Completions.New(ctxT(t), chat("gpt-4o")); err != nil {
		t.Fatal(err)
	}
	if got := g.served(); got["a"] != 1 || got["b"] != 2 {
		t.Errorf("served %v, want a quarantined after its 401", got)
	}
	if s := g.deploymentStatus(0, "gpt-4o", "a"); s.State != "cooldown" || s.RetryAfterMs < 250_000 {
		t.Errorf("a after a 401: %+v, want a configuration quarantine (300 s)", s)
	}
}

func TestContextOverflowFollowsItsChain(t *testing.T) {
	deps := []deployment{
		{ID: "small", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI},
		{ID: "big", Model: "claude-big", ProviderModel: "gpt-4o-big", Kind: fakeprovider.OpenAI},
		{ID: "other", Model: "gpt-4o-mini", ProviderModel: "gpt-4o-mini", Kind: fakeprovider.OpenAI},
	}
	g := startGateway(t, deps, gatewayOptions{chains: []*configv1.FallbackChain{
		{PublicModel: "gpt-4o", Reason: "general", Targets: []string{"gpt-4o-mini"}},
		{PublicModel: "gpt-4o", Reason: "context_window", Targets: []string{"claude-big"}},
	}})
	res, err := g.openai(option.WithHeader(fakeprovider.FaultHeader, "server=small; error=context_overflow")).
		Chat.Completions.New(ctxT(t), chat("gpt-4o"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content == "" {
		t.Error("empty answer")
	}
	if got := g.served(); got["small"] != 1 || got["big"] != 1 || got["other"] != 0 {
		t.Errorf("served %v, want small then the context_window chain's big", got)
	}
}

func TestAllCircuitsOpenIs503WithRetryAfter(t *testing.T) {
	zero := uint32(0)
	g := startGateway(t, []deployment{{ID: "only", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI}},
		gatewayOptions{settings: &configv1.RouterSettings{AllowedFails: &zero, CooldownSeconds: proto.Uint32(60)}})
	_, err := g.openai(option.WithHeader(fakeprovider.FaultHeader, "status=500")).Chat.Completions.New(ctxT(t), chat("gpt-4o"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusInternalServerError {
		t.Fatalf("first request: %v", err)
	}
	served := g.served()["only"]
	resp, body := g.post("/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || gjson.GetBytes(body, "error.code").String() != "model_overloaded" {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || ra < 55 || ra > 60 {
		t.Errorf("Retry-After %q, want the circuit's remaining ~60 s", resp.Header.Get("Retry-After"))
	}
	if g.served()["only"] != served {
		t.Error("a provider was called while every circuit was open")
	}
}

func TestUnifiedRoutingMetadata(t *testing.T) {
	g := startGateway(t, twoDeployments(deployment{}), gatewayOptions{settings: priceBased()})
	resp, body := g.post("/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"x-unified-routing-metadata": "true", fakeprovider.FaultHeader: "server=a; status=502"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	u := gjson.GetBytes(body, "unified_routing")
	if u.Get("strategy").String() != "price-based" || u.Get("deployment").String() != "b" || u.Get("fallback_used").Bool() {
		t.Errorf("unified_routing %s", u.Raw)
	}
	at := u.Get("attempts").Array()
	if len(at) != 2 || at[0].Get("deployment").String() != "a" || at[0].Get("status").Int() != 502 ||
		at[0].Get("error_class").String() != "transient" || at[1].Get("deployment").String() != "b" || at[1].Get("move").String() != "failover" {
		t.Errorf("attempts %s", u.Get("attempts").Raw)
	}
	// Without the header the body is the provider's.
	_, plain := g.post("/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, nil)
	if gjson.GetBytes(plain, "unified_routing").Exists() {
		t.Error("unified_routing without asking")
	}
}

func TestClientCancelDuringBackoffStopsEverything(t *testing.T) {
	g := startGateway(t, []deployment{{ID: "only", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI}}, gatewayOptions{})
	// The one deployment answers 500 with Retry-After 20 s: the reuse wait is 20 s.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := g.openai(option.WithHeader(fakeprovider.FaultHeader, "status=500; retry-after=20")).Chat.Completions.New(ctx, chat("gpt-4o"))
		done <- err
	}()
	eventually(t, "the first attempt", func() bool { return g.served()["only"] == 1 })
	eventually(t, "the retry wait", func() bool { return strings.Contains(g.logs.String(), "waiting before the next attempt") })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("client err %v", err)
		}
	case <-time.After(wait):
		t.Fatal("the client did not return")
	}
	eventually(t, "the route role noticing the cancel", func() bool {
		return strings.Contains(g.logs.String(), "request cancelled during a retry wait")
	})
	if g.served()["only"] != 1 {
		t.Errorf("served %v after the cancel", g.served())
	}
	eventually(t, "in-flight back to 0", func() bool { return g.inFlight("only") == 0 })
}

func TestBadRequestsInDialect(t *testing.T) {
	g := startGateway(t, []deployment{{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI}}, gatewayOptions{})
	resp, body := g.post("/v1/chat/completions", `not json`, nil)
	if resp.StatusCode != http.StatusBadRequest || gjson.GetBytes(body, "error.message").String() == "" {
		t.Errorf("non-JSON: %d %s", resp.StatusCode, body)
	}
	resp, body = g.post("/v1/messages", `{"model":`, map[string]string{"anthropic-version": "2023-06-01"})
	if resp.StatusCode != http.StatusBadRequest || gjson.GetBytes(body, "type").String() != "error" || gjson.GetBytes(body, "error.type").String() != "invalid_request_error" {
		t.Errorf("anthropic non-JSON: %d %s", resp.StatusCode, body)
	}
	resp, body = g.post("/v1/nope", `{}`, nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown path: %d %s", resp.StatusCode, body)
	}
	if len(g.served()) != 0 {
		t.Errorf("a provider was called: %v", g.served())
	}
}
