package sdktest

import (
	"errors"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
)

var created = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// TestModelsSDK: both SDKs list and get models from these bodies, and read a 404 for an
// unknown model as their typed not-found error.
func TestModelsSDK(t *testing.T) {
	names := []string{"gpt-4o", "meta/llama"}
	t.Run("openai", func(t *testing.T) {
		c := openai.NewClient(option.WithBaseURL(serve(t, dialect.ModelsResponse(dialect.OpenAI, names, created))+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
		page, err := c.Models.List(sdkCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 2 || page.Data[0].ID != "gpt-4o" || page.Data[1].ID != "meta/llama" || page.Data[0].OwnedBy != dialect.OwnedBy || page.Data[0].Created != created.Unix() {
			t.Errorf("list %+v", page.Data)
		}
		c = openai.NewClient(option.WithBaseURL(serve(t, dialect.ModelResponse(dialect.OpenAI, "gpt-4o", created))+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
		m, err := c.Models.Get(sdkCtx(t), "gpt-4o")
		if err != nil || m.ID != "gpt-4o" || m.Object != "model" {
			t.Errorf("get %+v %v", m, err)
		}
		c = openai.NewClient(option.WithBaseURL(serve(t, dialect.ModelNotFound(dialect.OpenAI, "x").Render("r"))+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
		var e *openai.Error
		if _, err := c.Models.Get(sdkCtx(t), "x"); !errors.As(err, &e) || e.StatusCode != 404 || e.Code != "model_not_found" {
			t.Errorf("get unknown: %v", err)
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		c := anthropic.NewClient(anthropicoption.WithBaseURL(serve(t, dialect.ModelsResponse(dialect.Anthropic, names, created))), anthropicoption.WithAPIKey("k"), anthropicoption.WithMaxRetries(0))
		page, err := c.Models.List(sdkCtx(t), anthropic.ModelListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 2 || page.Data[1].ID != "meta/llama" || page.Data[0].DisplayName != "gpt-4o" || !page.Data[0].CreatedAt.Equal(created) || page.HasMore || page.LastID != "meta/llama" {
			t.Errorf("list %+v", page)
		}
		c = anthropic.NewClient(anthropicoption.WithBaseURL(serve(t, dialect.ModelResponse(dialect.Anthropic, "gpt-4o", created))), anthropicoption.WithAPIKey("k"), anthropicoption.WithMaxRetries(0))
		m, err := c.Models.Get(sdkCtx(t), "gpt-4o", anthropic.ModelGetParams{})
		if err != nil || m.ID != "gpt-4o" || !m.CreatedAt.Equal(created) {
			t.Errorf("get %+v %v", m, err)
		}
		c = anthropic.NewClient(anthropicoption.WithBaseURL(serve(t, dialect.ModelNotFound(dialect.Anthropic, "x").Render("r"))), anthropicoption.WithAPIKey("k"), anthropicoption.WithMaxRetries(0))
		var e *anthropic.Error
		if _, err := c.Models.Get(sdkCtx(t), "x", anthropic.ModelGetParams{}); !errors.As(err, &e) || e.StatusCode != 404 || e.Type() != "not_found_error" {
			t.Errorf("get unknown: %v", err)
		}
	})
}
