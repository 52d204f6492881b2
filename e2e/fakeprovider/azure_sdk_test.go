package fakeprovider

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

const (
	azureKey        = "azure-test-key-0001"
	azureAPIVersion = "2024-10-21"
)

func azureOptions() Options {
	return Options{Kind: Azure, APIKey: azureKey, Deployments: map[string]string{"prod-4o": "gpt-4o-2024-08-06", "embed": ""}}
}

// azureClient drives the deployment-scoped route the way the azure option of openai-go
// builds it (azure/azure.go: /openai/deployments/{model}/…?api-version=…, Api-Key header).
// It uses the base URL and headers directly, so that the test needs no azcore module.
func azureClient(base, deployment string, opts ...option.RequestOption) *openai.Client {
	c := openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(base + "/openai/deployments/" + deployment + "/"),
		option.WithQuery("api-version", azureAPIVersion),
		option.WithHeader("api-key", azureKey),
		option.WithMaxRetries(0),
	}, opts...)...)
	return &c
}

// TestAzureChatJSON: the SDK decodes Azure's chat.completion; the deployment routes the
// request, the mapped model is reported and Azure's filter annotations are present.
func TestAzureChatJSON(t *testing.T) {
	s, base := start(t, azureOptions())
	res, err := azureClient(base, "prod-4o").Chat.Completions.New(ctxTimeout(t, 10*time.Second), chatParams())
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content != defaultText || res.Model != "gpt-4o-2024-08-06" || res.Usage.TotalTokens != 16 {
		t.Errorf("content=%q model=%q usage=%s", res.Choices[0].Message.Content, res.Model, res.Usage.RawJSON())
	}
	raw := res.RawJSON()
	if gjson.Get(raw, "prompt_filter_results.0.content_filter_results.hate.severity").String() != "safe" ||
		!gjson.Get(raw, "choices.0.content_filter_results").Exists() {
		t.Errorf("no Azure filter annotations in %s", raw)
	}
	r, _ := s.LastRequest()
	if r.Path != "/openai/deployments/prod-4o/chat/completions" || r.Query.Get("api-version") != azureAPIVersion ||
		r.Header.Get("api-key") != azureKey || r.Model != "prod-4o" {
		t.Errorf("recorded %s ?%v model=%s", r.Path, r.Query, r.Model)
	}
}

// TestAzureChatStream: the SDK copes with Azure's leading prompt-annotation chunk
// ("choices":[], empty id, usage null) and still accumulates text and the usage chunk.
func TestAzureChatStream(t *testing.T) {
	_, base := start(t, azureOptions())
	p := chatParams()
	p.StreamOptions.IncludeUsage = openai.Bool(true)
	stream := azureClient(base, "prod-4o").Chat.Completions.NewStreaming(ctxTimeout(t, 10*time.Second), p)
	var acc openai.ChatCompletionAccumulator
	var chunks []openai.ChatCompletionChunk
	for stream.Next() {
		chunks = append(chunks, stream.Current())
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	first := chunks[0]
	if first.ID != "" || len(first.Choices) != 0 || !gjson.Get(first.RawJSON(), "prompt_filter_results").Exists() ||
		gjson.Get(first.RawJSON(), "usage").Type != gjson.Null {
		t.Errorf("first chunk is not the annotation chunk: %s", first.RawJSON())
	}
	if acc.Choices[0].Message.Content != defaultText || acc.Usage.CompletionTokens != 4 || acc.Model != "gpt-4o-2024-08-06" {
		t.Errorf("content=%q usage=%s model=%s", acc.Choices[0].Message.Content, acc.Usage.RawJSON(), acc.Model)
	}
}

// TestAzureFilteredStream: EndFiltered ends the choice with finish_reason content_filter
// and content_filter_results, and the usage chunk bills the pieces sent (wire-formats §4.2).
func TestAzureFilteredStream(t *testing.T) {
	s, base := start(t, azureOptions())
	s.Script(Fault{End: EndFiltered, EndAfter: 2, Usage: UsageOn})
	stream := azureClient(base, "prod-4o").Chat.Completions.NewStreaming(ctxTimeout(t, 10*time.Second), chatParams())
	var acc openai.ChatCompletionAccumulator
	var finishChunk string
	for stream.Next() {
		ch := stream.Current()
		acc.AddChunk(ch)
		if len(ch.Choices) > 0 && ch.Choices[0].FinishReason != "" {
			finishChunk = ch.RawJSON()
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if gjson.Get(finishChunk, "choices.0.finish_reason").String() != "content_filter" ||
		!gjson.Get(finishChunk, "choices.0.content_filter_results.protected_material_text.filtered").Bool() {
		t.Errorf("finish chunk %s", finishChunk)
	}
	if want := strings.Join(split(defaultText, defaultChunks)[:2], ""); acc.Choices[0].Message.Content != want || acc.Usage.CompletionTokens != 2 {
		t.Errorf("content=%q usage=%s", acc.Choices[0].Message.Content, acc.Usage.RawJSON())
	}
}

// TestAzureErrors: Azure's error shapes surface through the SDK: the bare 404 for a
// missing api-version, DeploymentNotFound, code "401", content_filter with innererror, and
// the 429 with retry-after-ms.
func TestAzureErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		deployment string
		opts       []option.RequestOption
		fault      *Fault
		wantStatus int
		wantCode   string
		check      func(t *testing.T, e *openai.Error)
	}{
		{name: "missing_api_version", deployment: "prod-4o", opts: []option.RequestOption{option.WithQueryDel("api-version")},
			wantStatus: 404, wantCode: "404"},
		{name: "unknown_deployment", deployment: "nope", wantStatus: 404, wantCode: "DeploymentNotFound"},
		{name: "wrong_key", deployment: "prod-4o", opts: []option.RequestOption{option.WithHeader("api-key", "bad")}, wantStatus: 401, wantCode: "401"},
		{name: "content_filter", deployment: "prod-4o", fault: &Fault{Error: ContentPolicy}, wantStatus: 400, wantCode: "content_filter",
			check: func(t *testing.T, e *openai.Error) {
				if gjson.Get(e.RawJSON(), "innererror.code").String() != "ResponsibleAIPolicyViolation" ||
					!gjson.Get(e.RawJSON(), "innererror.content_filter_result.hate.filtered").Bool() {
					t.Errorf("innererror missing: %s", e.RawJSON())
				}
			}},
		{name: "rate_limit", deployment: "prod-4o", fault: &Fault{Error: RateLimited, RetryAfter: "3", RetryAfterMS: "2500"}, wantStatus: 429, wantCode: "429",
			check: func(t *testing.T, e *openai.Error) {
				if e.Response.Header.Get("retry-after-ms") != "2500" || !strings.Contains(e.Message, "Please retry after 3 seconds") {
					t.Errorf("headers %v message %q", e.Response.Header, e.Message)
				}
			}},
		{name: "quota", deployment: "prod-4o", fault: &Fault{Error: QuotaExhausted}, wantStatus: 429, wantCode: "429",
			check: func(t *testing.T, e *openai.Error) {
				if !strings.Contains(e.Message, "retry after 86400 seconds") {
					t.Errorf("message %q", e.Message)
				}
			}},
		{name: "context_overflow", deployment: "prod-4o", fault: &Fault{Error: ContextOverflow}, wantStatus: 400, wantCode: "context_length_exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, base := start(t, azureOptions())
			if tc.fault != nil {
				s.Script(*tc.fault)
			}
			_, err := azureClient(base, tc.deployment, tc.opts...).Chat.Completions.New(ctxTimeout(t, 10*time.Second), chatParams())
			var e *openai.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *openai.Error", err)
			}
			if e.StatusCode != tc.wantStatus || e.Code != tc.wantCode {
				t.Errorf("status=%d code=%q raw=%s", e.StatusCode, e.Code, e.RawJSON())
			}
			if tc.check != nil {
				tc.check(t, e)
			}
			if s.Pending() != 0 {
				t.Errorf("scripted fault not consumed")
			}
		})
	}
}

// TestAzureV1AndEmbeddings: the /openai/v1 route takes the deployment from "model" with
// Bearer auth and no api-version; embeddings work on the deployment route.
func TestAzureV1AndEmbeddings(t *testing.T) {
	s, base := start(t, azureOptions())
	v1 := openai.NewClient(option.WithBaseURL(base+"/openai/v1/"), option.WithAPIKey(azureKey), option.WithMaxRetries(0))
	p := chatParams()
	p.Model = "prod-4o"
	res, err := v1.Chat.Completions.New(ctxTimeout(t, 10*time.Second), p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Model != "gpt-4o-2024-08-06" {
		t.Errorf("model = %q", res.Model)
	}
	emb, err := azureClient(base, "embed").Embeddings.New(ctxTimeout(t, 10*time.Second), openai.EmbeddingNewParams{
		Model: "ignored-by-azure",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(emb.Data) != 1 || len(emb.Data[0].Embedding) != defaultEmbeddingDims || emb.Model != "embed" {
		t.Errorf("embeddings %s", emb.RawJSON())
	}
	reqs := s.Requests()
	if len(reqs) != 2 || reqs[1].Path != "/openai/deployments/embed/embeddings" || reqs[1].Model != "embed" {
		t.Errorf("recorded %+v", reqs)
	}
}
