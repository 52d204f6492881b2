package extproc

import (
	"strings"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
)

// What a client may see of a provider's response headers (docs/extproc.md, "Response
// headers"). A provider's headers name its account and project (openai-organization,
// openai-project), its limits (x-ratelimit-*, anthropic-ratelimit-*), its region and
// deployment (x-ms-*), its own request id, its cookies: none of that is the client's, and
// each tells which deployment served. The attempt role releases a response with every
// header outside clientResponseHeaders removed and switchyard's request id in the dialect's
// request-id header; the provider's id goes only into unified_routing
// (provider_request_id). The route's response_headers_to_remove (contract.ProviderResponseHeaders)
// removes the known provider headers once more in Envoy, so they go even when the attempt
// role could not process the response (docs/extproc.md, "When switchyard itself fails").

// clientResponseHeaders is the allow-list: the HTTP semantics of the body, nothing about who
// produced it. Pseudo-headers are never removed (Envoy refuses it), and x-envoy-* stay for
// Envoy (the attempt role's mutation_rules do not allow_envoy).
var clientResponseHeaders = map[string]bool{
	"content-type": true, "content-length": true, "content-encoding": true,
	"content-disposition": true, "content-language": true, "content-range": true,
	"accept-ranges": true, "cache-control": true, "date": true, "etag": true,
	"expires": true, "last-modified": true, "vary": true,
}

// providerRequestIDHeaders are where providers put their id of a response, in the order
// read: Anthropic's request-id, OpenAI's and Azure's x-request-id, Azure API Management's
// apim-request-id.
var providerRequestIDHeaders = [...]string{"request-id", "x-request-id", "apim-request-id", "x-ms-request-id"}

// clientResponse is the mutation that releases a provider's response headers h to the
// client: every header outside the allow-list removed, switchyard's requestID in family's
// request-id header.
func clientResponse(h headerMap, requestID string, family dialect.Family) mutation {
	var m mutation
	for name := range h.names() {
		if !clientResponseHeaders[name] && !strings.HasPrefix(name, ":") && !strings.HasPrefix(name, envoyPrefix) {
			m.removeHeader(name)
		}
	}
	if requestID != "" {
		name := dialect.HeaderOpenAIRequestID
		if family == dialect.Anthropic {
			name = dialect.HeaderAnthropicRequestID
		}
		m.setHeader(name, requestID)
	}
	return m
}

// maxProviderRequestID bounds the provider's request id kept in the state: ids are short,
// anything longer is not one.
const maxProviderRequestID = 128

// providerRequestID is the provider's id of its response in h, sanitised, or "".
func (p *attemptProcessor) providerRequestID() string {
	for _, name := range providerRequestIDHeaders {
		v, ok := p.headers.get(name)
		if !ok || v == "" {
			continue
		}
		if len(v) > maxProviderRequestID {
			return ""
		}
		return p.secrets().Sanitize(v)
	}
	return ""
}
