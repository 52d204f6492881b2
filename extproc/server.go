package extproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/internal/clock"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// Options configure a Server. Zero fields take the defaults.
type Options struct {
	// Clock is the binary's one clock (the router's and the sealer's); the system clock when nil.
	Clock  clock.Clock
	Logger *slog.Logger
	// Metrics receives the data plane's metrics; nil disables them.
	Metrics *Metrics
	// MaxRedirects is the route's max_internal_redirects: the route role never schedules an
	// attempt whose failure could not be redirected back to it (a 307 must never reach a
	// client).
	MaxRedirects int
	// MaxRequestBody is switchyard's one body-size setting (-max-request-body): the route
	// role answers a request over it with the dialect's 413 (by content-length at request
	// headers, else by the buffered body), the gRPC message limits are sized from it
	// (GRPCServerOptions), and xDS publishes it as Envoy's buffer limits (docs/xds.md).
	// Default 32 MiB.
	MaxRequestBody int
	// MaxResponseHold bounds a JSON response the attempt role holds to classify it; a larger
	// successful body passes through unbuffered and unmodified. Default MaxRequestBody.
	MaxResponseHold int
	// ClientAuth says who authenticates clients (clientauth.go); the zero value trusts
	// Envoy.
	ClientAuth ClientAuth
	// WaitMargin is added to override_message_timeout around a backoff wait so the real
	// answer arrives before Envoy's timer fires. Default 2 s.
	WaitMargin time.Duration
}

// Defaults of Options.
const (
	DefaultWaitMargin = 2 * time.Second
)

// Server is switchyard's ExternalProcessor: Process picks the role of the filter instance
// that opened the stream and runs that role's processor until the stream ends.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer

	router *routing.Router
	sealer *attemptstate.Sealer
	clock  clock.Clock
	log    *slog.Logger
	metric *Metrics
	opts   Options

	upstreams upstreams
	authLog   logEvery // failed client key checks (clientauth.go)
	secrets   configSecrets
}

// NewServer returns a Server deciding with router and sealing state with sealer.
func NewServer(router *routing.Router, sealer *attemptstate.Sealer, opts Options) *Server {
	if opts.Clock == nil {
		opts.Clock = clock.System{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxRedirects <= 0 {
		opts.MaxRedirects = contract.DefaultMaxRedirects
	}
	if opts.MaxRequestBody <= 0 {
		opts.MaxRequestBody = contract.DefaultMaxRequestBody
	}
	if opts.MaxResponseHold <= 0 {
		opts.MaxResponseHold = opts.MaxRequestBody
	}
	if opts.WaitMargin <= 0 {
		opts.WaitMargin = DefaultWaitMargin
	}
	return &Server{router: router, sealer: sealer, clock: opts.Clock, log: opts.Logger, metric: opts.Metrics, opts: opts}
}

// Register adds the ExternalProcessor and gRPC health services to gs.
func (s *Server) Register(gs *grpc.Server) {
	extprocv3.RegisterExternalProcessorServer(gs, s)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(extprocv3.ExternalProcessor_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
}

// Process implements ExternalProcessorServer.
func (s *Server) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	role := ""
	if v := metadata.ValueFromIncomingContext(stream.Context(), contract.HeaderRole); len(v) > 0 { // no copy of the metadata
		role = v[0]
	}
	var err error
	switch role {
	case contract.RoleRoute:
		err = newRouteProcessor(s, stream).run()
	case contract.RoleAttempt:
		err = newAttemptProcessor(s, stream).run()
	default:
		return status.Errorf(codes.InvalidArgument, "unknown %s %q: the filter's grpc_service.initial_metadata must name route or attempt", contract.HeaderRole, role)
	}
	if err != nil && !endOfStream(err) {
		s.log.Warn("ext_proc stream failed", "role", role, "err", err)
		return err
	}
	return nil
}

// endOfStream reports whether err only says that Envoy closed the stream: a reset
// (Canceled, Envoy's default close) or a half close (io.EOF, with graceful close).
func endOfStream(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return true
	}
	return status.Code(err) == codes.Canceled
}

// errUnexpected reports a message the role's phase does not expect.
func errUnexpected(role string, phase fmt.Stringer, req *extprocv3.ProcessingRequest) error {
	return status.Errorf(codes.FailedPrecondition, "%s role: unexpected %T in phase %s", role, req.GetRequest(), phase)
}

// finishAttempt records an attempt's outcome in the router and the metrics: the attempt
// role's and the trampoline's one way to end an attempt.
func (s *Server) finishAttempt(ctx context.Context, requestID string, req *routing.Request, dep *config.Deployment, attemptID string, res routing.Result) store.Transition {
	t, err := s.router.FinishAttempt(ctx, req, dep, attemptID, res)
	if err != nil {
		s.log.Warn("recording the attempt outcome failed", "request", requestID, "deployment", dep.ID, "err", err)
	}
	s.metric.attemptFinished(dep, req.Model, res, t)
	return t
}
