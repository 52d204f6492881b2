package provider

import (
	"errors"
	"fmt"
	"iter"
	"net/url"
	"slices"
	"strings"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

// AnthropicVersion is sent to Anthropic when the client sent none: the version every
// Anthropic SDK has long defaulted to (wire-formats §3.1).
const AnthropicVersion = "2023-06-01"

// ErrDialect is returned when a provider kind does not speak the client's dialect; the
// route role treats it as a capability mismatch (behaviour §9.2) until translation exists
// (behaviour §13.2).
var ErrDialect = errors.New("provider does not speak the client's dialect")

// Speaks reports whether provider kind p serves requests of dialect d as they are:
// OpenAI, Azure OpenAI and OpenAI-compatible servers speak the OpenAI APIs; Anthropic
// speaks Messages.
func Speaks(p failure.Provider, d dialect.Dialect) bool {
	return d != dialect.None && routing.Speaks(p, d.API())
}

// clientCredentialHeaders are the headers a client may carry its credentials in. The route
// role removes them before any attempt (they travel only inside the sealed state) and a
// rewrite never lets them reach a provider.
var clientCredentialHeaders = [...]string{"authorization", "proxy-authorization", "api-key", "x-api-key"}

// ClientCredentialHeaders yields the headers a client may carry its credentials in.
func ClientCredentialHeaders() iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, h := range clientCredentialHeaders {
			if !yield(h) {
				return
			}
		}
	}
}

// IsClientCredential reports whether header name (lower case) may carry a client's
// credentials.
func IsClientCredential(name string) bool { return slices.Contains(clientCredentialHeaders[:], name) }

// Upstream is a deployment's endpoint and credentials, compiled once per configuration
// so that a rewrite parses no URL.
type Upstream struct {
	Provider failure.Provider
	// Scheme and Authority are the base URL's scheme and host[:port].
	Scheme, Authority string
	// root is the base URL's path without a trailing slash ("" for a bare host).
	root string
	// azureV1: the Azure v1 API (/openai/v1/…, model = deployment, api-version optional).
	azureV1 bool
	// query is "?api-version=…" for Azure, or "".
	query string
	// azureUsage: the Azure api-version accepts stream_options.include_usage.
	azureUsage bool
	model      string
	// credName and credValue are the credential header; credName is "" without a key.
	credName, credValue string
	// remove are the client headers removed on every rewrite (credentials not overwritten,
	// other providers' headers).
	remove []string
}

// azureUsageSince is the first Azure api-version that accepts stream_options
// (wire-formats §4.1: "supported from api-version 2024-09-01-preview"). Azure versions
// are dates, so they compare as strings.
const azureUsageSince = "2024-09-01"

// Compile prepares d's rewrites. The base URL must be http or https with a host and no
// query. Paths:
//   - openai, openai-compatible: the base URL is the API root as SDKs take it (…/v1,
//     https://openrouter.ai/api/v1); a bare host means /v1.
//   - anthropic: the base URL is the host (or a path prefix) under which /v1/messages lives,
//     as Anthropic's SDKs take it; a base ending in /v1 is not doubled.
//   - azure-openai: classic deployment paths (/openai/deployments/{deployment}/…,
//     ?api-version required) unless the base URL ends in /openai/v1 or apiVersion is "v1",
//     which select the v1 API (wire-formats §4.1).
func Compile(d *config.Deployment) (*Upstream, error) {
	u, err := url.Parse(d.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("deployment %s: base URL: %w", d.ID, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("deployment %s: base URL %q: want http(s)://host[:port][/path] without query or user info", d.ID, d.BaseURL)
	}
	up := &Upstream{Provider: d.Provider, Scheme: u.Scheme, Authority: u.Host, model: d.ProviderModel,
		root: strings.TrimRight(u.EscapedPath(), "/")}
	switch d.Provider {
	case failure.ProviderOpenAI, failure.ProviderOpenAICompatible:
		if d.APIKey != "" {
			up.credName, up.credValue = "authorization", "Bearer "+d.APIKey
		}
	case failure.ProviderAzureOpenAI:
		if d.APIKey != "" {
			up.credName, up.credValue = "api-key", d.APIKey
		}
		v := d.APIVersion
		switch {
		case strings.HasSuffix(up.root, "/openai/v1"):
			up.azureV1 = true
		case strings.EqualFold(v, "v1"):
			up.azureV1, up.root = true, up.root+"/openai/v1"
		}
		switch {
		case up.azureV1:
			up.azureUsage = true
			if v != "" && !strings.EqualFold(v, "v1") && !strings.EqualFold(v, "latest") {
				up.query = "?api-version=" + url.QueryEscape(v)
			}
		case v == "":
			return nil, fmt.Errorf("deployment %s: azure-openai deployment paths need an apiVersion", d.ID)
		default:
			up.query = "?api-version=" + url.QueryEscape(v)
			up.azureUsage = v >= azureUsageSince
		}
	case failure.ProviderAnthropic:
		if d.APIKey != "" {
			up.credName, up.credValue = "x-api-key", d.APIKey
		}
		if !strings.HasSuffix(up.root, "/v1") {
			up.root += "/v1"
		}
	default:
		return nil, fmt.Errorf("deployment %s: unknown provider %q", d.ID, d.Provider)
	}
	for _, h := range clientCredentialHeaders {
		if h != up.credName {
			up.remove = append(up.remove, h)
		}
	}
	if d.Provider != failure.ProviderAnthropic {
		up.remove = append(up.remove, "anthropic-version", "anthropic-beta")
	}
	// The client's OpenAI account scoping (openai-go option.WithOrganization/WithProject)
	// names its account, not the deployment's: OpenAI refuses a key with another
	// organization's header.
	up.remove = append(up.remove, "openai-organization", "openai-project")
	up.remove = append(up.remove, HeaderUnifiedRouting)
	return up, nil
}

// Path is the upstream :path for a request of dialect d, or ErrDialect.
func (up *Upstream) Path(d dialect.Dialect) (string, error) {
	if !Speaks(up.Provider, d) {
		return "", fmt.Errorf("%s for %s: %w", up.Provider, d, ErrDialect)
	}
	op := ""
	switch d {
	case dialect.Chat:
		op = "/chat/completions"
	case dialect.Responses:
		op = "/responses"
	case dialect.Embeddings:
		op = "/embeddings"
	case dialect.Messages:
		op = "/messages"
	}
	switch up.Provider {
	case failure.ProviderAzureOpenAI:
		if up.azureV1 {
			return up.root + op + up.query, nil
		}
		// openai-python lib/azure.py: deployment-scoped paths for chat and embeddings,
		// /openai/responses (model = deployment) for the rest (wire-formats §4.1).
		if d == dialect.Responses {
			return up.root + "/openai" + op + up.query, nil
		}
		return up.root + "/openai/deployments/" + url.PathEscape(up.model) + op + up.query, nil
	case failure.ProviderAnthropic:
		return up.root + op, nil
	default:
		if up.root == "" {
			return "/v1" + op, nil
		}
		return up.root + op, nil
	}
}
