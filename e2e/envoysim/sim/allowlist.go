package sim

// The allow-list: every proto field envoysim implements, and every extension type it
// accepts in typed_config. A config that sets any other field (or uses any other
// extension) is rejected with an error naming the field, so a bootstrap never
// silently means something different in envoysim than in Envoy. Enum values and
// cross-field rules are checked where the config is compiled (clusters.go,
// routes.go, hcm.go, extproc.NewConfig).
//
// Fields marked "no effect" only feed Envoy's stats or logs; they are accepted so the
// same bootstrap runs in both.

// Field names are protobuf full names: <message full name>.<field name>.
var supportedFields = setOf(
	// Bootstrap (api/envoy/config/bootstrap/v3/bootstrap.proto).
	"envoy.config.bootstrap.v3.Bootstrap.node",
	"envoy.config.bootstrap.v3.Bootstrap.static_resources",
	"envoy.config.bootstrap.v3.Bootstrap.dynamic_resources",
	"envoy.config.bootstrap.v3.Bootstrap.admin",
	"envoy.config.bootstrap.v3.Bootstrap.StaticResources.listeners",
	"envoy.config.bootstrap.v3.Bootstrap.StaticResources.clusters",
	"envoy.config.bootstrap.v3.Bootstrap.DynamicResources.ads_config",
	"envoy.config.bootstrap.v3.Bootstrap.DynamicResources.cds_config",
	"envoy.config.bootstrap.v3.Admin.address", // serves /ready only
	"envoy.config.core.v3.Node.id",
	"envoy.config.core.v3.Node.cluster",
	"envoy.config.core.v3.Node.metadata",
	"envoy.config.core.v3.Node.locality",
	"envoy.config.core.v3.Locality.region", // no effect
	"envoy.config.core.v3.Locality.zone",
	"envoy.config.core.v3.Locality.sub_zone",

	// xDS config sources (api/envoy/config/core/v3/config_source.proto).
	"envoy.config.core.v3.ApiConfigSource.api_type", // GRPC only
	"envoy.config.core.v3.ApiConfigSource.transport_api_version",
	"envoy.config.core.v3.ApiConfigSource.grpc_services",
	"envoy.config.core.v3.ApiConfigSource.set_node_on_first_message_only", // no effect
	"envoy.config.core.v3.ConfigSource.ads",
	"envoy.config.core.v3.ConfigSource.resource_api_version",
	"envoy.config.core.v3.GrpcService.envoy_grpc",
	"envoy.config.core.v3.GrpcService.timeout",
	"envoy.config.core.v3.GrpcService.initial_metadata",
	"envoy.config.core.v3.GrpcService.EnvoyGrpc.cluster_name",
	"envoy.config.core.v3.GrpcService.EnvoyGrpc.authority",
	"envoy.config.core.v3.GrpcService.EnvoyGrpc.max_receive_message_length", // ext_proc only
	"envoy.config.core.v3.HeaderValue.key",
	"envoy.config.core.v3.HeaderValue.value",
	"envoy.config.core.v3.HeaderValue.raw_value",

	// Listeners (api/envoy/config/listener/v3/listener.proto).
	"envoy.config.listener.v3.Listener.name",
	"envoy.config.listener.v3.Listener.address",
	"envoy.config.listener.v3.Listener.filter_chains",
	"envoy.config.listener.v3.Listener.per_connection_buffer_limit_bytes",
	"envoy.config.listener.v3.Listener.stat_prefix", // no effect
	"envoy.config.listener.v3.FilterChain.filters",
	"envoy.config.listener.v3.FilterChain.name", // no effect
	"envoy.config.listener.v3.Filter.name",
	"envoy.config.listener.v3.Filter.typed_config",
	"envoy.config.core.v3.Address.socket_address",
	"envoy.config.core.v3.SocketAddress.address",
	"envoy.config.core.v3.SocketAddress.port_value",
	"envoy.config.core.v3.SocketAddress.protocol", // TCP only

	// HTTP connection manager (api/envoy/extensions/filters/network/http_connection_manager/v3).
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.codec_type",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.stat_prefix", // no effect
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.route_config",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.rds",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.http_filters",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.generate_request_id",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.use_remote_address",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.xff_num_trusted_hops",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.internal_address_config",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.InternalAddressConfig.cidr_ranges",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.InternalAddressConfig.unix_sockets", // no effect: listeners are TCP only
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.stream_idle_timeout",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.request_timeout",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.max_request_headers_kb",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.common_http_protocol_options",
	"envoy.config.core.v3.HttpProtocolOptions.idle_timeout",
	"envoy.config.core.v3.HttpProtocolOptions.max_headers_count",
	"envoy.config.core.v3.HttpProtocolOptions.max_stream_duration",
	"envoy.config.core.v3.HttpProtocolOptions.headers_with_underscores_action",
	"envoy.config.core.v3.CidrRange.address_prefix",
	"envoy.config.core.v3.CidrRange.prefix_len",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.server_name",
	// local_reply_config (source/common/local_reply/local_reply.cc; local_reply.go).
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.local_reply_config",
	"envoy.extensions.filters.network.http_connection_manager.v3.LocalReplyConfig.mappers",
	"envoy.extensions.filters.network.http_connection_manager.v3.LocalReplyConfig.body_format",
	"envoy.extensions.filters.network.http_connection_manager.v3.ResponseMapper.filter",
	"envoy.extensions.filters.network.http_connection_manager.v3.ResponseMapper.status_code",
	"envoy.extensions.filters.network.http_connection_manager.v3.ResponseMapper.body_format_override",
	"envoy.config.core.v3.SubstitutionFormatString.text_format",
	"envoy.config.core.v3.SubstitutionFormatString.json_format",
	"envoy.config.core.v3.SubstitutionFormatString.content_type",
	"envoy.config.accesslog.v3.AccessLogFilter.status_code_filter",
	"envoy.config.accesslog.v3.AccessLogFilter.header_filter",
	"envoy.config.accesslog.v3.AccessLogFilter.metadata_filter",
	"envoy.config.accesslog.v3.AccessLogFilter.and_filter",
	"envoy.config.accesslog.v3.AccessLogFilter.or_filter",
	"envoy.config.accesslog.v3.StatusCodeFilter.comparison",
	"envoy.config.accesslog.v3.ComparisonFilter.op",
	"envoy.config.accesslog.v3.ComparisonFilter.value",
	"envoy.config.core.v3.RuntimeUInt32.default_value",
	"envoy.config.core.v3.RuntimeUInt32.runtime_key", // refused when set (local_reply.go)
	"envoy.config.accesslog.v3.HeaderFilter.header",
	"envoy.config.accesslog.v3.AndFilter.filters",
	"envoy.config.accesslog.v3.OrFilter.filters",
	"envoy.config.accesslog.v3.MetadataFilter.matcher",
	"envoy.config.accesslog.v3.MetadataFilter.match_if_key_not_found",
	"envoy.type.matcher.v3.MetadataMatcher.filter",
	"envoy.type.matcher.v3.MetadataMatcher.path",
	"envoy.type.matcher.v3.MetadataMatcher.PathSegment.key",
	"envoy.type.matcher.v3.MetadataMatcher.value",
	"envoy.type.matcher.v3.ValueMatcher.present_match",
	"envoy.type.matcher.v3.ValueMatcher.bool_match",
	"envoy.type.matcher.v3.ValueMatcher.string_match",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter.name",
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter.typed_config",
	"envoy.extensions.filters.network.http_connection_manager.v3.Rds.config_source",
	"envoy.extensions.filters.network.http_connection_manager.v3.Rds.route_config_name",

	// Routes (api/envoy/config/route/v3/route.proto, route_components.proto).
	"envoy.config.route.v3.RouteConfiguration.name",
	"envoy.config.route.v3.RouteConfiguration.virtual_hosts",
	"envoy.config.route.v3.VirtualHost.name",
	"envoy.config.route.v3.VirtualHost.domains",
	"envoy.config.route.v3.VirtualHost.routes",
	"envoy.config.route.v3.VirtualHost.retry_policy",
	"envoy.config.route.v3.VirtualHost.include_request_attempt_count",
	"envoy.config.route.v3.VirtualHost.include_attempt_count_in_response",
	"envoy.config.route.v3.VirtualHost.per_request_buffer_limit_bytes",
	"envoy.config.route.v3.VirtualHost.request_body_buffer_limit",
	"envoy.config.route.v3.Route.name",
	"envoy.config.route.v3.Route.match",
	"envoy.config.route.v3.Route.route",
	"envoy.config.route.v3.Route.direct_response",
	"envoy.config.route.v3.Route.response_headers_to_remove",
	"envoy.config.route.v3.DirectResponseAction.status",
	"envoy.config.route.v3.DirectResponseAction.body",
	"envoy.config.core.v3.DataSource.inline_string",
	"envoy.config.core.v3.DataSource.inline_bytes",
	"envoy.config.route.v3.Route.per_request_buffer_limit_bytes",
	"envoy.config.route.v3.Route.request_body_buffer_limit",
	"envoy.config.route.v3.RouteMatch.prefix",
	"envoy.config.route.v3.RouteMatch.path",
	"envoy.config.route.v3.RouteMatch.safe_regex",
	"envoy.config.route.v3.RouteMatch.headers",
	"envoy.config.route.v3.RouteMatch.case_sensitive",
	"envoy.config.route.v3.RouteAction.cluster",
	"envoy.config.route.v3.RouteAction.cluster_header",
	"envoy.config.route.v3.RouteAction.cluster_not_found_response_code",
	"envoy.config.route.v3.RouteAction.timeout",
	"envoy.config.route.v3.RouteAction.idle_timeout",
	"envoy.config.route.v3.RouteAction.retry_policy",
	"envoy.config.route.v3.RouteAction.internal_redirect_policy",
	"envoy.config.route.v3.InternalRedirectPolicy.max_internal_redirects",
	"envoy.config.route.v3.InternalRedirectPolicy.redirect_response_codes",
	"envoy.config.route.v3.InternalRedirectPolicy.allow_cross_scheme_redirect",
	"envoy.config.route.v3.InternalRedirectPolicy.response_headers_to_copy",
	"envoy.config.route.v3.RetryPolicy.retry_on",
	"envoy.config.route.v3.RetryPolicy.num_retries",
	"envoy.config.route.v3.RetryPolicy.per_try_timeout",
	"envoy.config.route.v3.RetryPolicy.retry_priority",
	"envoy.config.route.v3.RetryPolicy.retry_host_predicate",
	"envoy.config.route.v3.RetryPolicy.host_selection_retry_max_attempts",
	"envoy.config.route.v3.RetryPolicy.retriable_status_codes",
	"envoy.config.route.v3.RetryPolicy.retry_back_off",
	"envoy.config.route.v3.RetryPolicy.retriable_headers",
	"envoy.config.route.v3.RetryPolicy.retriable_request_headers",
	"envoy.config.route.v3.RetryPolicy.RetryPriority.name",
	"envoy.config.route.v3.RetryPolicy.RetryPriority.typed_config",
	"envoy.config.route.v3.RetryPolicy.RetryHostPredicate.name",
	"envoy.config.route.v3.RetryPolicy.RetryHostPredicate.typed_config",
	"envoy.config.route.v3.RetryPolicy.RetryBackOff.base_interval",
	"envoy.config.route.v3.RetryPolicy.RetryBackOff.max_interval",
	"envoy.config.route.v3.HeaderMatcher.name",
	"envoy.config.route.v3.HeaderMatcher.exact_match",
	"envoy.config.route.v3.HeaderMatcher.prefix_match",
	"envoy.config.route.v3.HeaderMatcher.suffix_match",
	"envoy.config.route.v3.HeaderMatcher.contains_match",
	"envoy.config.route.v3.HeaderMatcher.safe_regex_match",
	"envoy.config.route.v3.HeaderMatcher.present_match",
	"envoy.config.route.v3.HeaderMatcher.string_match",
	"envoy.config.route.v3.HeaderMatcher.range_match",
	"envoy.config.route.v3.HeaderMatcher.invert_match",
	"envoy.config.route.v3.HeaderMatcher.treat_missing_header_as_empty",
	"envoy.type.matcher.v3.StringMatcher.exact",
	"envoy.type.matcher.v3.StringMatcher.prefix",
	"envoy.type.matcher.v3.StringMatcher.suffix",
	"envoy.type.matcher.v3.StringMatcher.contains",
	"envoy.type.matcher.v3.StringMatcher.safe_regex",
	"envoy.type.matcher.v3.StringMatcher.ignore_case",
	"envoy.type.matcher.v3.ListStringMatcher.patterns",
	"envoy.type.matcher.v3.RegexMatcher.regex",
	"envoy.type.matcher.v3.RegexMatcher.google_re2",
	"envoy.type.v3.Int64Range.start",
	"envoy.type.v3.Int64Range.end",
	"envoy.type.v3.HttpStatus.code",

	// Router filter (api/envoy/extensions/filters/http/router/v3/router.proto).
	"envoy.extensions.filters.http.router.v3.Router.suppress_envoy_headers",
	"envoy.extensions.filters.http.router.v3.Router.upstream_http_filters",

	// ext_proc (api/envoy/extensions/filters/http/ext_proc/v3/ext_proc.proto).
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.grpc_service",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.failure_mode_allow",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.processing_mode",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.request_attributes",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.response_attributes",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.message_timeout",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.max_message_timeout",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.stat_prefix", // no effect
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.mutation_rules",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.forward_rules",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.allow_mode_override",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.allowed_override_modes",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.disable_immediate_response",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.metadata_options",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.disable_clear_route_cache",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.route_cache_action",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.send_body_without_waiting_for_header_response",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor.status_on_error",
	"envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.request_header_mode",
	"envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.response_header_mode",
	"envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.request_body_mode",
	"envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.response_body_mode",
	"envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.request_trailer_mode",
	"envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.response_trailer_mode",
	"envoy.extensions.filters.http.ext_proc.v3.HeaderForwardingRules.allowed_headers",
	"envoy.extensions.filters.http.ext_proc.v3.HeaderForwardingRules.disallowed_headers",
	"envoy.extensions.filters.http.ext_proc.v3.MetadataOptions.forwarding_namespaces",
	"envoy.extensions.filters.http.ext_proc.v3.MetadataOptions.receiving_namespaces",
	"envoy.extensions.filters.http.ext_proc.v3.MetadataOptions.MetadataNamespaces.untyped",
	"envoy.extensions.filters.http.ext_proc.v3.MetadataOptions.MetadataNamespaces.typed",
	"envoy.config.common.mutation_rules.v3.HeaderMutationRules.allow_all_routing",
	"envoy.config.common.mutation_rules.v3.HeaderMutationRules.allow_envoy",
	"envoy.config.common.mutation_rules.v3.HeaderMutationRules.disallow_system",
	"envoy.config.common.mutation_rules.v3.HeaderMutationRules.disallow_all",
	"envoy.config.common.mutation_rules.v3.HeaderMutationRules.allow_expression",
	"envoy.config.common.mutation_rules.v3.HeaderMutationRules.disallow_expression",
	"envoy.config.common.mutation_rules.v3.HeaderMutationRules.disallow_is_error",

	// Clusters (api/envoy/config/cluster/v3/cluster.proto, circuit_breaker.proto).
	"envoy.config.cluster.v3.Cluster.name",
	"envoy.config.cluster.v3.Cluster.type",
	"envoy.config.cluster.v3.Cluster.eds_cluster_config",
	"envoy.config.cluster.v3.Cluster.connect_timeout",
	"envoy.config.cluster.v3.Cluster.lb_policy",
	"envoy.config.cluster.v3.Cluster.load_assignment",
	"envoy.config.cluster.v3.Cluster.circuit_breakers",
	// Accepted; the upstream filters use the downstream stream's buffer limit, which
	// switchyard sizes from the same setting (no flow control is modelled).
	"envoy.config.cluster.v3.Cluster.per_connection_buffer_limit_bytes",
	"envoy.config.cluster.v3.Cluster.typed_extension_protocol_options",
	"envoy.config.cluster.v3.Cluster.transport_socket",
	"envoy.config.cluster.v3.Cluster.transport_socket_matches",
	"envoy.config.cluster.v3.Cluster.metadata",
	"envoy.config.cluster.v3.Cluster.dns_lookup_family",
	"envoy.config.cluster.v3.Cluster.dns_refresh_rate", // no effect: names are resolved on every connect
	"envoy.config.cluster.v3.Cluster.respect_dns_ttl",  // no effect: names are resolved on every connect
	"envoy.config.cluster.v3.Cluster.EdsClusterConfig.eds_config",
	"envoy.config.cluster.v3.Cluster.EdsClusterConfig.service_name",
	"envoy.config.cluster.v3.Cluster.TransportSocketMatch.name",
	"envoy.config.cluster.v3.Cluster.TransportSocketMatch.match",
	"envoy.config.cluster.v3.Cluster.TransportSocketMatch.transport_socket",
	"envoy.config.cluster.v3.CircuitBreakers.thresholds",
	"envoy.config.cluster.v3.CircuitBreakers.Thresholds.priority",
	"envoy.config.cluster.v3.CircuitBreakers.Thresholds.max_retries",
	"envoy.config.cluster.v3.CircuitBreakers.Thresholds.max_pending_requests",
	"envoy.config.cluster.v3.CircuitBreakers.Thresholds.max_requests",
	// Not enforced, a lowered value is silently ignored: envoysim dials one connection per
	// attempt (and one per gRPC cluster). Envoy queues a request past it as pending.
	"envoy.config.cluster.v3.CircuitBreakers.Thresholds.max_connections",
	"envoy.config.core.v3.TransportSocket.name",
	"envoy.config.core.v3.TransportSocket.typed_config",
	"envoy.config.core.v3.Metadata.filter_metadata",

	// Endpoints (api/envoy/config/endpoint/v3/endpoint.proto, endpoint_components.proto).
	"envoy.config.endpoint.v3.ClusterLoadAssignment.cluster_name",
	"envoy.config.endpoint.v3.ClusterLoadAssignment.endpoints",
	"envoy.config.endpoint.v3.ClusterLoadAssignment.policy",
	"envoy.config.endpoint.v3.ClusterLoadAssignment.Policy.overprovisioning_factor",
	"envoy.config.endpoint.v3.LocalityLbEndpoints.lb_endpoints",
	"envoy.config.endpoint.v3.LocalityLbEndpoints.priority",
	"envoy.config.endpoint.v3.LocalityLbEndpoints.locality", // no effect
	"envoy.config.endpoint.v3.LbEndpoint.endpoint",
	"envoy.config.endpoint.v3.LbEndpoint.health_status",
	"envoy.config.endpoint.v3.LbEndpoint.metadata",
	"envoy.config.endpoint.v3.LbEndpoint.load_balancing_weight",
	"envoy.config.endpoint.v3.Endpoint.address",
	"envoy.config.endpoint.v3.Endpoint.hostname",

	// Upstream HTTP protocol options (api/envoy/extensions/upstreams/http/v3/http_protocol_options.proto).
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.explicit_http_config",
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.auto_config",
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.http_filters",
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.ExplicitHttpConfig.http_protocol_options",
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.ExplicitHttpConfig.http2_protocol_options",
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.AutoHttpConfig.http_protocol_options",
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.AutoHttpConfig.http2_protocol_options",

	// Retry plugins.
	"envoy.extensions.retry.priority.previous_priorities.v3.PreviousPrioritiesConfig.update_frequency",
)

// supportedTypes are the typed_config extensions envoysim implements.
var supportedTypes = setOf(
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
	"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
	"envoy.extensions.filters.http.router.v3.Router",
	"envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec",
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
	"envoy.extensions.retry.priority.previous_priorities.v3.PreviousPrioritiesConfig",
	"envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate",
	"envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
	"envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer",
)

// delegatedTypes are validated by the package that implements them rather than by the
// field allow-list (UpstreamTlsContext: upstreamtls.ClientConfig rejects what it does
// not support, naming the field).
var delegatedTypes = setOf(
	"envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
)

// freeFormTypes hold arbitrary data (metadata values, durations, wrappers): their
// contents are never checked against the allow-list. Messages without fields
// (Http1ProtocolOptions{}, UpstreamCodec{}, ...) need no entry: any field set inside
// them is rejected.
var freeFormTypes = setOf(
	"google.protobuf.Struct",
	"google.protobuf.Value",
	"google.protobuf.ListValue",
	"google.protobuf.Duration",
	"google.protobuf.BoolValue",
	"google.protobuf.UInt32Value",
	"google.protobuf.UInt64Value",
	"google.protobuf.Int64Value",
	"google.protobuf.StringValue",
)

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
