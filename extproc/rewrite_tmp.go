package extproc

// TEMPORARY until extproc/provider lands (do not commit).

import (
	"net/url"
	"strings"

	"github.com/tidwall/sjson"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

type providerRequest struct {
	Path, Authority string
	Set             []header
	Remove          []string
	Body            []byte
}

func rewriteFor(d *config.Deployment, dl dialect.Dialect, body []byte) (providerRequest, error) {
	u, err := url.Parse(d.BaseURL)
	if err != nil {
		return providerRequest{}, err
	}
	var r providerRequest
	r.Authority = u.Host
	base := strings.TrimSuffix(u.Path, "/")
	suffix := map[dialect.Dialect]string{dialect.Chat: "/chat/completions", dialect.Responses: "/responses", dialect.Embeddings: "/embeddings", dialect.Messages: "/messages"}[dl]
	switch d.Provider {
	case failure.ProviderAzureOpenAI:
		r.Path = base + "/openai/deployments/" + d.ProviderModel + suffix + "?api-version=" + d.APIVersion
		r.Set = append(r.Set, header{"api-key", d.APIKey})
	case failure.ProviderAnthropic:
		r.Path = base + "/v1" + suffix
		r.Set = append(r.Set, header{"x-api-key", d.APIKey}, header{"anthropic-version", "2023-06-01"})
	default:
		r.Path = base + "/v1" + suffix
		r.Set = append(r.Set, header{"authorization", "Bearer " + d.APIKey})
	}
	r.Body, err = sjson.SetBytes(body, "model", d.ProviderModel)
	return r, err
}
