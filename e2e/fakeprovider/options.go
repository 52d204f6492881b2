package fakeprovider

import (
	"fmt"
)

// Kind selects the provider dialect a Server speaks.
type Kind int

const (
	// OpenAI serves /v1/chat/completions, /v1/responses and /v1/embeddings with
	// Authorization: Bearer auth (wire-formats §1, §2).
	OpenAI Kind = iota + 1
	// Azure serves /openai/deployments/{deployment}/{chat/completions,embeddings}?api-version=…
	// and the /openai/v1/… routes, with api-key or Bearer auth (wire-formats §4).
	Azure
	// Anthropic serves /v1/messages with x-api-key (or Bearer) and anthropic-version
	// (wire-formats §3).
	Anthropic
)

// String returns the dialect name used in logs and test names.
func (k Kind) String() string {
	switch k {
	case OpenAI:
		return "openai"
	case Azure:
		return "azure"
	case Anthropic:
		return "anthropic"
	default:
		return fmt.Sprintf("Kind(%d)", int(k))
	}
}

// DefaultCreated is the Unix time put in "created"/"created_at" fields unless
// Options.Created is set; a fixed value keeps response bodies byte-for-byte reproducible.
const DefaultCreated = 1_700_000_000

// Options configures a Server. Only Kind is required.
type Options struct {
	// Kind is the provider dialect.
	Kind Kind
	// Name identifies this fake in the "server=" filter of FaultHeader, so that one header
	// sent through the gateway can target one of several fakes.
	Name string
	// APIKey is the only key accepted. Empty disables the auth check (any key, or none, is
	// accepted).
	APIKey string
	// Models lists the models the fake knows (OpenAI and Anthropic). A request for another
	// model gets the provider's 404. Empty accepts every model.
	Models []string
	// Deployments maps Azure deployment names to the model name reported in response
	// bodies (an empty value reports the deployment name). A request for a deployment not
	// in the map gets 404 DeploymentNotFound. Nil accepts every deployment.
	Deployments map[string]string
	// Content is the default response content; zero fields take the defaults documented
	// on Content.
	Content Content
	// Created is the Unix time used in response bodies; 0 means DefaultCreated.
	Created int64
}

func (o Options) validate() error {
	switch o.Kind {
	case OpenAI, Azure, Anthropic:
	default:
		return fmt.Errorf("fakeprovider: unknown Kind %v", o.Kind)
	}
	if o.Deployments != nil && o.Kind != Azure {
		return fmt.Errorf("fakeprovider: Deployments is only meaningful for Azure, not %v", o.Kind)
	}
	if err := o.Content.withDefaults().validate(); err != nil {
		return fmt.Errorf("fakeprovider: options: %w", err)
	}
	return nil
}
