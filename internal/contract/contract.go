// Package contract holds the names the data plane (extproc: the route and attempt roles and
// the trampoline) and the control plane (xds, the shipped bootstraps) must agree on across
// Envoy: the headers and dynamic metadata Envoy carries between them, the roles' gRPC
// initial metadata, the deployment clusters' names and the defaults both sides size Envoy
// with. xds depends on this package and not on the data plane (docs/design.md).
package contract

// Headers Envoy carries between the roles, or between a role and the route.
const (
	// HeaderState carries the sealed attempt state across passes, on the 307 and in the
	// redirected request: the route copies it (internal_redirect_policy
	// response_headers_to_copy).
	HeaderState = "x-switchyard-state"
	// HeaderCluster is the route's cluster_header: the route role sets it to
	// ClusterName(deployment).
	HeaderCluster = "x-switchyard-cluster"
	// HeaderRole is the gRPC initial metadata naming the role of an ext_proc filter
	// instance (its grpc_service.initial_metadata).
	HeaderRole = "x-switchyard-role"
)

// Roles, the values of HeaderRole.
const (
	RoleRoute   = "route"
	RoleAttempt = "attempt"
)

// Dynamic metadata.
const (
	// MetadataNamespace is the namespace the roles share within one pass: the route role
	// writes the sealed state, the attempt roles read it as request attributes
	// (AttributeState, AttributeSent), and the trampoline endpoint's host metadata lives
	// there.
	MetadataNamespace = "switchyard"
	// MetadataState is the sealed attempt state in MetadataNamespace (the route role's).
	MetadataState = "state"
	// MetadataSent marks, in MetadataNamespace, that the provider attempt's request went out
	// (the attempt role's): the trampoline attempt tells a refused connect from a timeout by it.
	MetadataSent = "sent"
	// MetadataTrampoline marks the trampoline endpoint (priority 1 of every deployment
	// cluster) in MetadataNamespace; the attempt role reads it as a request attribute.
	MetadataTrampoline = "trampoline"
)

// The request attributes the attempt role asks Envoy for (the upstream filter's
// request_attributes) and reads back under the ext_proc filter's name.
const (
	// AttributeClusterName is the cluster the attempt runs in: it must be the state's
	// deployment's.
	AttributeClusterName = "xds.cluster_name"
	// AttributeTrampoline reads the trampoline endpoint's MetadataTrampoline mark: the
	// attempt is the trampoline attempt.
	AttributeTrampoline = "xds.upstream_host_metadata.filter_metadata['" + MetadataNamespace + "']['" + MetadataTrampoline + "']"
	// AttributeState and AttributeSent read the request's dynamic metadata (Envoy's CEL
	// attribute metadata, the StreamInfo the upstream filter shares with the route role).
	// Envoy evaluates request_attributes once, with the first request message of the stream
	// (ext_proc.cc Filter::addAttributes), where metadata_options.forwarding_namespaces
	// would send the namespace with every message, each response body chunk included
	// (setupBodyChunk → addDynamicMetadata).
	AttributeState = "metadata.filter_metadata['" + MetadataNamespace + "']['" + MetadataState + "']"
	AttributeSent  = "metadata.filter_metadata['" + MetadataNamespace + "']['" + MetadataSent + "']"
)

// clusterPrefix starts every deployment cluster's name.
const clusterPrefix = "sy-dep-"

// ClusterName is the Envoy cluster of a deployment.
func ClusterName(deploymentID string) string { return clusterPrefix + deploymentID }

// Defaults both sides size Envoy with.
const (
	// DefaultMaxRedirects is the route's max_internal_redirects: the route role never
	// schedules an attempt whose failure could not be redirected back to it.
	DefaultMaxRedirects = 10
	// DefaultMaxRequestBody is the one body-size setting (-max-request-body): the route
	// role's 413, the gRPC message limits, and Envoy's buffer limits over xDS.
	DefaultMaxRequestBody = 32 << 20
)

// ProviderResponseHeaders are the provider headers the route removes in Envoy
// (response_headers_to_remove, xds/route.go and envoy/static-clusters.yaml.tmpl), a fresh
// copy per call. Envoy removes only names given in full there (header_parser.cc
// HeaderParser::evaluateHeaders), no prefixes, so this lists the headers of the providers
// switchyard speaks to; the attempt role's allow-list catches every other one. The
// request-id headers are not here: the attempt role puts switchyard's id in them, and the
// route's removal runs after the upstream filters (router.cc Filter::onUpstreamHeaders,
// finalizeResponseHeaders).
func ProviderResponseHeaders() []string {
	return []string{
		// OpenAI (wire-formats §1.4).
		"openai-organization", "openai-project", "openai-processing-ms", "openai-version", "openai-model",
		"x-ratelimit-limit-requests", "x-ratelimit-limit-tokens",
		"x-ratelimit-remaining-requests", "x-ratelimit-remaining-tokens",
		"x-ratelimit-reset-requests", "x-ratelimit-reset-tokens",
		// Anthropic (wire-formats §3.4).
		"anthropic-organization-id",
		"anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset",
		"anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset",
		"anthropic-ratelimit-input-tokens-limit", "anthropic-ratelimit-input-tokens-remaining", "anthropic-ratelimit-input-tokens-reset",
		"anthropic-ratelimit-output-tokens-limit", "anthropic-ratelimit-output-tokens-remaining", "anthropic-ratelimit-output-tokens-reset",
		// Azure OpenAI (wire-formats §4).
		"apim-request-id", "x-ms-request-id", "x-ms-client-request-id", "x-ms-region", "x-ms-rai-invoked",
		"x-ms-deployment-name", "azureml-model-session",
		// Any provider's edge.
		"set-cookie", "alt-svc", "strict-transport-security", "cf-ray", "cf-cache-status",
		"x-should-retry",
	}
}
