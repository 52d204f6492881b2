package xds

import (
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	previouspriorities "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/switchyard-gw/switchyard/internal/contract"
)

// buildRoute is the route configuration of docs/design.md item 5, over RDS so its numbers are
// switchyard's own: the route role picks the cluster with x-switchyard-cluster, every
// failure comes back as a 307 internal redirect, a transport failure is retried onto the
// trampoline at priority 1.
func buildRoute(o Options) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{
		Name: o.RouteConfigName,
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    "switchyard",
			Domains: []string{"*"},
			// x-envoy-attempt-count tells the attempt role a retry (the trampoline attempt)
			// from a first attempt.
			IncludeRequestAttemptCount: true,
			Routes: []*routev3.Route{{
				Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				// The route role buffers whole request bodies and internal redirects replay
				// them: without this the stream limit is the listener's
				// per_connection_buffer_limit_bytes (VirtualHost.request_body_buffer_limit
				// docs, route_components.proto).
				RequestBodyBufferLimit: wrapperspb.UInt64(o.RequestBodyBufferLimit),
				// The provider headers go in Envoy too, so that a response the attempt role
				// could not process (failure_mode_allow) does not show them; Envoy applies
				// it after the upstream filters and to local replies before their own
				// headers (source/common/router/header_parser.cc evaluateHeaders, router.cc
				// onUpstreamHeaders, docs/extproc.md "Response headers").
				ResponseHeadersToRemove: contract.ProviderResponseHeaders(),
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{
					// Set by the route role (with clear_route_cache) to sy-dep-<id>.
					ClusterSpecifier: &routev3.RouteAction_ClusterHeader{ClusterHeader: contract.HeaderCluster},
					// switchyard sets per-attempt timeouts with x-envoy-upstream-rq-*-ms.
					Timeout:     durationpb.New(0),
					RetryPolicy: trampolineRetry(),
					InternalRedirectPolicy: &routev3.InternalRedirectPolicy{
						MaxInternalRedirects:  wrapperspb.UInt32(o.MaxInternalRedirects),
						RedirectResponseCodes: []uint32{307},
						ResponseHeadersToCopy: []string{contract.HeaderState},
					},
				}},
			}},
		}},
	}
}

// trampolineRetry sends a transport failure before response headers (refused, reset, a
// refused HTTP/2 stream) to the other priority once: previous_priorities excludes the
// priority already tried (source/extensions/retry/priority/previous_priorities/
// previous_priorities.cc), so the retry lands on the trampoline, whose 307 fails over.
func trampolineRetry() *routev3.RetryPolicy {
	return &routev3.RetryPolicy{
		RetryOn:    "connect-failure,reset,refused-stream",
		NumRetries: wrapperspb.UInt32(1),
		RetryPriority: &routev3.RetryPolicy_RetryPriority{
			Name: "envoy.retry_priorities.previous_priorities",
			ConfigType: &routev3.RetryPolicy_RetryPriority_TypedConfig{TypedConfig: mustAny(
				&previouspriorities.PreviousPrioritiesConfig{UpdateFrequency: 1})},
		},
	}
}
