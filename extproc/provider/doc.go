// Package provider owns how a request is rewritten for the deployment that serves an
// attempt: the upstream :scheme, :authority and :path per provider kind (OpenAI, Azure
// OpenAI deployment and v1 paths, Anthropic, OpenAI-compatible base paths), the provider's
// credential headers, the client headers that must not reach a provider, and the body
// rewrite (model → the provider's model, OpenAI stream usage). It also says which client
// dialects each provider kind speaks.
//
// It knows nothing of Envoy or gRPC: the attempt role turns a Rewrite into an ext_proc
// header and body mutation.
package provider
