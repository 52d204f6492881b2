// Package xds publishes switchyard's deployments to Envoy over ADS (go-control-plane): one
// cluster per deployment and the route configuration, built from the configuration in
// force (docs/design.md "Control plane", docs/xds.md).
package xds

import (
	"fmt"
	"net"
	"time"

	"github.com/switchyard-gw/switchyard/internal/contract"
)

// Options are the parts of the xDS resources that come from switchyard's flags rather than
// from its configuration. They must agree with the bootstrap (ExtProcCluster) and with the
// ext_proc server (MaxInternalRedirects, RequestBodyBufferLimit).
type Options struct {
	// ExtProcCluster is the bootstrap's static cluster of switchyard's ext_proc gRPC server,
	// used by the attempt-role filter of every deployment cluster (default switchyard_extproc).
	ExtProcCluster string
	// Trampoline is the host:port of switchyard's trampoline, every deployment cluster's
	// priority-1 endpoint. Required.
	Trampoline string
	// MaxInternalRedirects is the route's max_internal_redirects; it must be switchyard's
	// -max-internal-redirects (extproc.Options.MaxRedirects; default contract.DefaultMaxRedirects).
	MaxInternalRedirects uint32
	// RouteConfigName is the RDS name the bootstrap's HCM asks for (default switchyard).
	RouteConfigName string
	// ConnectTimeout is every deployment cluster's connect_timeout, TLS handshake included
	// (default 5 s, Envoy's own default).
	ConnectTimeout time.Duration
	// RequestBodyBufferLimit is switchyard's -max-request-body (extproc.Options.MaxRequestBody):
	// the route's request_body_buffer_limit (the largest request body Envoy buffers for the
	// route role and replays on internal redirects) and every deployment cluster's
	// per_connection_buffer_limit_bytes (the attempt role's buffered body). Default
	// contract.DefaultMaxRequestBody.
	RequestBodyBufferLimit uint64
	// AttemptMessageTimeout is the attempt-role ext_proc message_timeout (default 5 s).
	AttemptMessageTimeout time.Duration
	// UpstreamCAFile is the CA bundle, on Envoy's file system, that provider certificates
	// must chain to (default /etc/ssl/certs/ca-certificates.crt, present in the official
	// Envoy image).
	UpstreamCAFile string
}

// Defaults of Options.
const (
	DefaultExtProcCluster        = "switchyard_extproc"
	DefaultRouteConfigName       = "switchyard"
	DefaultConnectTimeout        = 5 * time.Second
	DefaultAttemptMessageTimeout = 5 * time.Second
	DefaultUpstreamCAFile        = "/etc/ssl/certs/ca-certificates.crt"
)

// withDefaults fills the unset fields and checks the rest.
func (o Options) withDefaults() (Options, error) {
	if o.ExtProcCluster == "" {
		o.ExtProcCluster = DefaultExtProcCluster
	}
	if o.MaxInternalRedirects == 0 {
		o.MaxInternalRedirects = contract.DefaultMaxRedirects
	}
	if o.RouteConfigName == "" {
		o.RouteConfigName = DefaultRouteConfigName
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.RequestBodyBufferLimit == 0 {
		o.RequestBodyBufferLimit = contract.DefaultMaxRequestBody
	}
	if o.AttemptMessageTimeout <= 0 {
		o.AttemptMessageTimeout = DefaultAttemptMessageTimeout
	}
	if o.UpstreamCAFile == "" {
		o.UpstreamCAFile = DefaultUpstreamCAFile
	}
	if _, _, err := splitPort(o.Trampoline); err != nil {
		return o, fmt.Errorf("xds: trampoline address: %w", err)
	}
	return o, nil
}

// splitPort splits a host:port with a numeric, non-zero port.
func splitPort(hostport string) (string, uint32, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, fmt.Errorf("%q: %w", hostport, err)
	}
	p, err := parsePort(port)
	if err != nil || host == "" {
		return "", 0, fmt.Errorf("%q: want host:port", hostport)
	}
	return host, p, nil
}
