package extproc

import (
	"errors"
	"fmt"
	"time"

	epv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/grpc/metadata"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/match"
)

// Defaults from source/extensions/filters/http/ext_proc/config.h
// (DefaultMessageTimeoutMs = 200, DefaultMaxMessageTimeoutMs = 0) and
// api/envoy/extensions/filters/http/ext_proc/v3/ext_proc.proto.
const (
	defaultMessageTimeout = 200 * time.Millisecond
	// FilterName keys ProcessingRequest.attributes (ext_proc.cc FilterName).
	FilterName = "envoy.filters.http.ext_proc"
)

// Config is a validated ExternalProcessor filter config.
type Config struct {
	Proto *epv3.ExternalProcessor
	// GrpcCluster is grpc_service.envoy_grpc.cluster_name.
	GrpcCluster string
	// Authority is grpc_service.envoy_grpc.authority (defaults to the cluster name).
	Authority string
	// StreamTimeout is grpc_service.timeout (0 = none): it bounds the whole gRPC stream.
	StreamTimeout time.Duration
	// InitialMetadata is grpc_service.initial_metadata.
	InitialMetadata metadata.MD
	// MaxReceiveMessageLength is grpc_service.envoy_grpc.max_receive_message_length
	// (0 = unlimited), applied by limitConn.
	MaxReceiveMessageLength uint32

	MessageTimeout    time.Duration
	MaxMessageTimeout time.Duration
	StatusOnError     int
	routeCacheAction  epv3.ExternalProcessor_RouteCacheAction
	checker           *checker
	allowedHeaders    []*match.String
	disallowedHeaders []*match.String
	requestAttrs      []*attrExpr
	responseAttrs     []*attrExpr
	forwardNS         []string
	typedForwardNS    []string
	receiveNS         []string
}

// NewConfig validates pb the way Envoy's ExternalProcessingFilterConfig does
// (source/extensions/filters/http/ext_proc/config.cc verifyFilterConfig /
// verifyProcessingModeConfig) and compiles it. Fields envoysim does not implement are
// rejected by the bootstrap allow-list before this runs.
func NewConfig(pb *epv3.ExternalProcessor) (*Config, error) {
	if (pb.GetGrpcService() != nil) == (pb.GetHttpService() != nil) {
		return nil, envoyError("One and only one of grpc_service or http_service must be configured")
	}
	if pb.GetDisableClearRouteCache() && pb.GetRouteCacheAction() != epv3.ExternalProcessor_DEFAULT {
		return nil, envoyError("disable_clear_route_cache and route_cache_action can not be set to none-default at the same time.")
	}
	pm := pb.GetProcessingMode()
	if pm.GetRequestBodyMode() == epv3.ProcessingMode_FULL_DUPLEX_STREAMED && pm.GetRequestTrailerMode() != epv3.ProcessingMode_SEND {
		return nil, envoyError("If the ext_proc filter has the request_body_mode set to FULL_DUPLEX_STREAMED, then the request_trailer_mode has to be set to SEND")
	}
	if pm.GetResponseBodyMode() == epv3.ProcessingMode_FULL_DUPLEX_STREAMED && pm.GetResponseTrailerMode() != epv3.ProcessingMode_SEND {
		return nil, envoyError("If the ext_proc filter has the response_body_mode set to FULL_DUPLEX_STREAMED, then the response_trailer_mode has to be set to SEND")
	}
	// GRPC body mode is [#not-implemented-hide:] in processing_mode.proto.
	if pm.GetRequestBodyMode() == epv3.ProcessingMode_GRPC || pm.GetResponseBodyMode() == epv3.ProcessingMode_GRPC {
		return nil, errors.New("ext_proc body mode GRPC is not implemented by Envoy")
	}
	eg := pb.GetGrpcService().GetEnvoyGrpc()
	if eg == nil {
		return nil, errors.New("ext_proc grpc_service: only envoy_grpc is supported by envoysim")
	}
	c := &Config{
		Proto:             pb,
		GrpcCluster:       eg.GetClusterName(),
		Authority:         eg.GetAuthority(),
		StreamTimeout:     pb.GetGrpcService().GetTimeout().AsDuration(),
		InitialMetadata:   metadata.MD{},
		MessageTimeout:    defaultMessageTimeout,
		StatusOnError:     500,
		routeCacheAction:  pb.GetRouteCacheAction(),
		forwardNS:         pb.GetMetadataOptions().GetForwardingNamespaces().GetUntyped(),
		typedForwardNS:    pb.GetMetadataOptions().GetForwardingNamespaces().GetTyped(),
		receiveNS:         pb.GetMetadataOptions().GetReceivingNamespaces().GetUntyped(),
		MaxMessageTimeout: pb.GetMaxMessageTimeout().AsDuration(),

		MaxReceiveMessageLength: eg.GetMaxReceiveMessageLength().GetValue(),
	}
	if c.Authority == "" {
		c.Authority = c.GrpcCluster
	}
	if pb.GetMessageTimeout() != nil {
		c.MessageTimeout = pb.GetMessageTimeout().AsDuration()
	}
	// FilterConfig constructor: disable_clear_route_cache means RETAIN.
	if pb.GetDisableClearRouteCache() {
		c.routeCacheAction = epv3.ExternalProcessor_RETAIN
	}
	// status_on_error (1.36+): the HTTP status for local replies on errors; default 500
	// (FilterConfig toErrorCode).
	if s := pb.GetStatusOnError(); s != nil && s.GetCode() != 0 {
		c.StatusOnError = int(s.GetCode())
	}
	for _, hv := range pb.GetGrpcService().GetInitialMetadata() {
		v := hv.GetValue()
		if len(hv.GetRawValue()) > 0 {
			v = string(hv.GetRawValue())
		}
		c.InitialMetadata.Append(hv.GetKey(), v)
	}
	var err error
	if c.checker, err = newChecker(pb.GetMutationRules()); err != nil {
		return nil, fmt.Errorf("ext_proc mutation_rules: %w", err)
	}
	for _, p := range pb.GetForwardRules().GetAllowedHeaders().GetPatterns() {
		m, err := match.NewString(p)
		if err != nil {
			return nil, fmt.Errorf("ext_proc forward_rules.allowed_headers: %w", err)
		}
		c.allowedHeaders = append(c.allowedHeaders, m)
	}
	for _, p := range pb.GetForwardRules().GetDisallowedHeaders().GetPatterns() {
		m, err := match.NewString(p)
		if err != nil {
			return nil, fmt.Errorf("ext_proc forward_rules.disallowed_headers: %w", err)
		}
		c.disallowedHeaders = append(c.disallowedHeaders, m)
	}
	if c.requestAttrs, err = parseAttrs(pb.GetRequestAttributes()); err != nil {
		return nil, fmt.Errorf("ext_proc request_attributes: %w", err)
	}
	if c.responseAttrs, err = parseAttrs(pb.GetResponseAttributes()); err != nil {
		return nil, fmt.Errorf("ext_proc response_attributes: %w", err)
	}
	return c, nil
}

// headerCanBeForwarded imitates MutationUtils::headerCanBeForwarded (forward_rules).
func (c *Config) headerCanBeForwarded(key string) bool {
	in := func(ms []*match.String) bool {
		for _, m := range ms {
			if m.Match(key) {
				return true
			}
		}
		return false
	}
	if len(c.disallowedHeaders) > 0 && in(c.disallowedHeaders) {
		return false
	}
	return len(c.allowedHeaders) == 0 || in(c.allowedHeaders)
}

// envoyError keeps Envoy's own wording (capitalisation and punctuation included) so
// that envoysim's config errors read like Envoy's.
func envoyError(msg string) error { return errors.New(msg) }

// envoyErrorf is envoyError with formatting.
func envoyErrorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
