package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
)

func (g *gateway) openai(opts ...option.RequestOption) *openai.Client {
	c := openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(g.base + "/v1/"), option.WithAPIKey(clientKey), option.WithMaxRetries(0),
	}, opts...)...)
	return &c
}

func (g *gateway) anthropic(opts ...anthropicoption.RequestOption) *anthropic.Client {
	c := anthropic.NewClient(append([]anthropicoption.RequestOption{
		anthropicoption.WithBaseURL(g.base), anthropicoption.WithAPIKey(clientKey), anthropicoption.WithMaxRetries(0),
	}, opts...)...)
	return &c
}

func chat(model string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
}

// concurrentChats sends n chat completions for model at once and returns how many failed
// (an error, or an empty answer) and the first error.
func (g *gateway) concurrentChats(t *testing.T, n int, model string) (failed int, first error) {
	ctx := ctxT(t)
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			res, err := g.openai().Chat.Completions.New(ctx, chat(model))
			if err == nil && res.Choices[0].Message.Content == "" {
				err = errors.New("empty answer")
			}
			errs <- err
		}()
	}
	close(start)
	for range n {
		if err := <-errs; err != nil {
			if failed++; first == nil {
				first = err
			}
		}
	}
	return failed, first
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

// assertClean checks what crossed the gateway: no provider saw the client's key or the
// state, and every provider request carried its own key.
func (g *gateway) assertClean() {
	g.t.Helper()
	for id, f := range g.fakes {
		for _, r := range f.Requests() {
			for name, vs := range r.Header {
				for _, v := range vs {
					if strings.Contains(v, clientKey) {
						g.t.Errorf("%s saw the client key in %s", id, name)
					}
				}
				if strings.HasPrefix(strings.ToLower(name), "x-switchyard") {
					g.t.Errorf("%s saw switchyard header %s", id, name)
				}
			}
		}
	}
	for id := range g.fakes {
		if strings.Contains(g.logs.String(), providerKey(id)) || strings.Contains(g.logs.String(), clientKey) {
			g.t.Errorf("a key appears in the logs")
		}
	}
}

func TestChatSuccessRewritesForOpenAI(t *testing.T) { forModes(t, testChatSuccessRewritesForOpenAI) }

func testChatSuccessRewritesForOpenAI(t *testing.T, xdsMode bool) {
	g := startGateway(t, []deployment{{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o-2024-11-20", Kind: fakeprovider.OpenAI}}, gatewayOptions{xds: xdsMode})
	res, err := g.openai().Chat.Completions.New(ctxT(t), chat("gpt-4o"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content != "Hello from the fake provider." {
		t.Errorf("content %q", res.Choices[0].Message.Content)
	}
	r, ok := g.fakes["oa"].LastRequest()
	if !ok {
		t.Fatal("the provider saw no request")
	}
	if r.Path != "/v1/chat/completions" || r.Model != "gpt-4o-2024-11-20" || r.Header.Get("Authorization") != "Bearer "+providerKey("oa") {
		t.Errorf("provider saw path=%s model=%s auth=%q", r.Path, r.Model, r.Header.Get("Authorization"))
	}
	g.assertClean()
	eventually(t, "in-flight back to 0", func() bool { return g.inFlight("oa") == 0 })
}

func TestChatSuccessRewritesForAzure(t *testing.T) {
	g := startGateway(t, []deployment{{ID: "az", Model: "gpt-4o", ProviderModel: "gpt4o-prod", Kind: fakeprovider.Azure}}, gatewayOptions{})
	if _, err := g.openai().Chat.Completions.New(ctxT(t), chat("gpt-4o")); err != nil {
		t.Fatal(err)
	}
	r, _ := g.fakes["az"].LastRequest()
	if r.Path != "/openai/deployments/gpt4o-prod/chat/completions" || r.Query.Get("api-version") != "2024-10-21" ||
		r.Header.Get("Api-Key") != providerKey("az") || r.Header.Get("Authorization") != "" {
		t.Errorf("provider saw path=%s query=%v api-key=%q auth=%q", r.Path, r.Query, r.Header.Get("Api-Key"), r.Header.Get("Authorization"))
	}
	g.assertClean()
}

func TestMessagesSuccessRewritesForAnthropic(t *testing.T) {
	g := startGateway(t, []deployment{{ID: "an", Model: "claude", ProviderModel: "claude-sonnet-4-5", Kind: fakeprovider.Anthropic}}, gatewayOptions{})
	msg, err := g.anthropic().Messages.New(ctxT(t), anthropic.MessageNewParams{
		Model: "claude", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) == 0 || msg.Content[0].Text != "Hello from the fake provider." {
		t.Errorf("content %+v", msg.Content)
	}
	r, _ := g.fakes["an"].LastRequest()
	if r.Path != "/v1/messages" || r.Model != "claude-sonnet-4-5" || r.Header.Get("X-Api-Key") != providerKey("an") || r.Header.Get("Anthropic-Version") == "" {
		t.Errorf("provider saw path=%s model=%s x-api-key=%q version=%q", r.Path, r.Model, r.Header.Get("X-Api-Key"), r.Header.Get("Anthropic-Version"))
	}
	g.assertClean()
}

// twoDeployments: "a" is cheaper, so price-based routing tries it first.
func twoDeployments(a deployment) []deployment {
	a.ID, a.Model, a.ProviderModel, a.Price = "a", "gpt-4o", "gpt-4o", 1
	if a.Kind == 0 {
		a.Kind = fakeprovider.OpenAI
	}
	return []deployment{a, {ID: "b", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI, Price: 2}}
}

func priceBased() *configv1.RouterSettings {
	s := "price-based"
	return &configv1.RouterSettings{RoutingStrategy: &s}
}

func TestServerErrorFailsOver(t *testing.T) { forModes(t, testServerErrorFailsOver) }

func testServerErrorFailsOver(t *testing.T, xdsMode bool) {
	g := startGateway(t, twoDeployments(deployment{}), gatewayOptions{xds: xdsMode, settings: priceBased()})
	res, err := g.openai(option.WithHeader(fakeprovider.FaultHeader, "server=a; status=500")).Chat.Completions.New(ctxT(t), chat("gpt-4o"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content == "" {
		t.Error("empty answer")
	}
	if got := g.served(); got["a"] != 1 || got["b"] != 1 {
		t.Errorf("served %v, want one attempt on each", got)
	}
	g.assertClean()
	eventually(t, "in-flight back to 0", func() bool { return g.inFlight("a", "b") == 0 })
}

func TestConnectionRefusedGoesThroughTrampoline(t *testing.T) {
	forModes(t, testConnectionRefusedGoesThroughTrampoline)
}

func testConnectionRefusedGoesThroughTrampoline(t *testing.T, xdsMode bool) {
	g := startGateway(t, twoDeployments(deployment{Down: true}), gatewayOptions{xds: xdsMode, settings: priceBased()})
	res, err := g.openai().Chat.Completions.New(ctxT(t), chat("gpt-4o"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content == "" {
		t.Error("empty answer")
	}
	if got := g.served(); got["b"] != 1 {
		t.Errorf("served %v, want b once", got)
	}
	if !strings.Contains(g.logs.String(), `"via":"trampoline"`) {
		t.Error("the trampoline did not record the failure")
	}
	eventually(t, "in-flight back to 0", func() bool { return g.inFlight("a", "b") == 0 })
}

// A deployment that goes down under load: every request that tried it reaches the trampoline
// and fails over, however many are retrying at once. Envoy bounds a cluster's concurrent
// retries by circuit_breakers max_retries, 3 by default (RetryStateImpl::shouldRetry answers
// NoOverflow beyond it, and the client gets the connect failure's 503), so the deployment
// clusters lift that bound for the trampoline's retry.
func TestConcurrentConnectFailuresAllReachTheTrampoline(t *testing.T) {
	forModes(t, testConcurrentConnectFailuresAllReachTheTrampoline)
}

func testConcurrentConnectFailuresAllReachTheTrampoline(t *testing.T, xdsMode bool) {
	g := startGateway(t, twoDeployments(deployment{Down: true}), gatewayOptions{xds: xdsMode, settings: priceBased()})
	const n = 24
	if failed, first := g.concurrentChats(t, n, "gpt-4o"); failed > 0 {
		t.Fatalf("%d of %d concurrent requests failed instead of failing over (first: %v)", failed, n, first)
	}
	if got := g.served(); got["b"] != n {
		t.Errorf("served %v, want b %d times", got, n)
	}
	eventually(t, "in-flight back to 0", func() bool { return g.inFlight("a", "b") == 0 })
}

func TestResetBeforeHeadersGoesThroughTrampoline(t *testing.T) {
	g := startGateway(t, twoDeployments(deployment{}), gatewayOptions{settings: priceBased()})
	res, err := g.openai(option.WithHeader(fakeprovider.FaultHeader, "server=a; reset")).Chat.Completions.New(ctxT(t), chat("gpt-4o"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content == "" {
		t.Error("empty answer")
	}
	if got := g.served(); got["a"] != 1 || got["b"] != 1 {
		t.Errorf("served %v", got)
	}
	if !strings.Contains(g.logs.String(), `"via":"trampoline"`) {
		t.Error("the trampoline did not record the failure")
	}
	eventually(t, "in-flight back to 0", func() bool { return g.inFlight("a", "b") == 0 })
}

func TestAllFailingReturnsLastProviderError(t *testing.T) {
	g := startGateway(t, twoDeployments(deployment{}), gatewayOptions{settings: priceBased()})
	_, err := g.openai(option.WithHeader(fakeprovider.FaultHeader, "status=503; message=upstream is sad")).Chat.Completions.New(ctxT(t), chat("gpt-4o"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v (%T), want *openai.Error", err, err)
	}
	if apiErr.StatusCode != http.StatusServiceUnavailable || !strings.Contains(apiErr.Message, "upstream is sad") {
		t.Errorf("status %d message %q; raw %s", apiErr.StatusCode, apiErr.Message, apiErr.RawJSON())
	}
	if got := g.served(); got["a"] < 1 || got["b"] < 1 {
		t.Errorf("served %v, want both tried", got)
	}
	eventually(t, "in-flight back to 0", func() bool { return g.inFlight("a", "b") == 0 })
}

func TestForgedStateIsIgnored(t *testing.T) {
	g := startGateway(t, []deployment{{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI}}, gatewayOptions{})
	resp, body := g.post("/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"x-switchyard-state": "AAAAforged", "authorization": "Bearer " + clientKey})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if gjson.GetBytes(body, "choices.0.message.content").String() == "" {
		t.Errorf("body %s", body)
	}
	if !strings.Contains(g.logs.String(), "attempt state rejected") {
		t.Error("the forged state was not reported")
	}
	g.assertClean()
}

func TestUnknownModelIs404InDialect(t *testing.T) {
	g := startGateway(t, []deployment{{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI}}, gatewayOptions{})
	_, err := g.openai().Chat.Completions.New(ctxT(t), chat("nope"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" {
		t.Fatalf("err = %v", err)
	}
	_, err = g.anthropic().Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "nope", MaxTokens: 5,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var aErr *anthropic.Error
	if !errors.As(err, &aErr) || aErr.StatusCode != http.StatusNotFound {
		t.Fatalf("err = %v", err)
	}
	if len(g.served()) != 0 {
		t.Errorf("a provider was called: %v", g.served())
	}
}

func TestModelsList(t *testing.T) {
	g := startGateway(t, []deployment{{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI}}, gatewayOptions{})
	page, err := g.openai().Models.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "gpt-4o" {
		t.Errorf("models %+v", page.Data)
	}
}

// TestDialectMismatchIsACapabilityMismatch: until requests are translated (behaviour §13.2), a
// deployment whose provider speaks another API is skipped like any capability mismatch.
func TestDialectMismatchIsACapabilityMismatch(t *testing.T) {
	g := startGateway(t, []deployment{
		{ID: "oa", Model: "mixed", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI},
		{ID: "an", Model: "mixed", ProviderModel: "claude-sonnet-4-5", Kind: fakeprovider.Anthropic},
	}, gatewayOptions{})
	for i := 0; i < 6; i++ {
		if _, err := g.openai().Chat.Completions.New(ctxT(t), chat("mixed")); err != nil {
			t.Fatal(err)
		}
		if _, err := g.anthropic().Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "mixed", MaxTokens: 16,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := g.served(); got["oa"] != 6 || got["an"] != 6 {
		t.Errorf("served %v, want each request on the deployment speaking its API", got)
	}
}

func TestResponsesAndEmbeddingsSucceed(t *testing.T) {
	g := startGateway(t, []deployment{{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o-2024-11-20", Kind: fakeprovider.OpenAI}}, gatewayOptions{})
	res, err := g.openai().Responses.New(ctxT(t), responses.ResponseNewParams{
		Model: "gpt-4o", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.OutputText() == "" {
		t.Errorf("empty output %s", res.RawJSON())
	}
	r, _ := g.fakes["oa"].LastRequest()
	if r.Path != "/v1/responses" || r.Model != "gpt-4o-2024-11-20" {
		t.Errorf("provider saw %s model %s", r.Path, r.Model)
	}
	emb, err := g.openai().Embeddings.New(ctxT(t), openai.EmbeddingNewParams{
		Model: "gpt-4o", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(emb.Data) != 1 || len(emb.Data[0].Embedding) == 0 {
		t.Errorf("embeddings %s", emb.RawJSON())
	}
	r, _ = g.fakes["oa"].LastRequest()
	if r.Path != "/v1/embeddings" {
		t.Errorf("provider saw %s", r.Path)
	}
	g.assertClean()
}
