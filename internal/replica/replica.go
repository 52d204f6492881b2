// Package replica assembles one switchyard replica the way the binary runs it: the ext_proc
// gRPC server with both roles (production's keepalives and message limits), the trampoline,
// and, when asked, the xDS server publishing the deployments. The binary and every test
// harness build their replicas here, so what the tests run is what ships: the redirect
// budget check, the body limit and the gRPC settings are applied once, in New.
package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/switchyard-gw/switchyard/extproc"
	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/internal/clock"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/xds"
)

// Config is what a replica is made of.
type Config struct {
	// Router routes every attempt; Live is its configuration, which xDS publishes.
	Router *routing.Router
	Live   *config.Live
	// Keys seal the attempt state; replicas sharing a store must share them.
	Keys       attemptstate.Keys
	ClientAuth extproc.ClientAuth
	// MaxRedirects is the route's max_internal_redirects (default
	// contract.DefaultMaxRedirects); every policy's maxAttempts must fit in it.
	MaxRedirects int
	// MaxRequestBody is the one body-size setting (default contract.DefaultMaxRequestBody).
	MaxRequestBody int
	// Clock is the binary's one clock; the system clock when nil.
	Clock  clock.Clock
	Logger *slog.Logger
	// Registry receives the data plane's and xDS's metrics; none are kept when nil.
	Registry prometheus.Registerer
	// Listeners are where the servers serve; the replica owns them from New on. ExtProc
	// and Trampoline default to a free loopback port; without an XDS listener there is no
	// xDS server.
	Listeners Listeners
	// TrampolineAdvertise is the trampoline's host:port as Envoy reaches it, published over
	// xDS (default: the trampoline listener's address).
	TrampolineAdvertise string
	// XDS tunes the published resources; the trampoline, redirect budget and body limit are
	// the replica's own and override what is set here.
	XDS xds.Options
	// ExtProcGRPC and XDSGRPC are extra gRPC server options (TLS credentials).
	ExtProcGRPC, XDSGRPC []grpc.ServerOption
}

// Listeners are a replica's listeners.
type Listeners struct {
	ExtProc, Trampoline, XDS net.Listener
}

// Replica is one replica, listening; Serve runs it and Shutdown ends it.
type Replica struct {
	ExtProc *extproc.Server
	// XDS is nil unless Config.Listeners.XDS was given.
	XDS *xds.Server

	grpc       *grpc.Server
	trampoline *http.Server
	extprocLn  net.Listener
	trampLn    net.Listener
	xdsLn      net.Listener
	stopXDS    context.CancelFunc
	xdsDone    chan struct{}
}

// keepalives: Envoy keeps one gRPC connection for every stream; keepalives find a dead one,
// and Envoy's own HTTP/2 pings are allowed every 5 s.
func keepalives() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}
}

// New builds the replica on its listeners, opening the default ones; on an error every
// listener is closed.
func New(c Config) (_ *Replica, err error) {
	r := &Replica{extprocLn: c.Listeners.ExtProc, trampLn: c.Listeners.Trampoline, xdsLn: c.Listeners.XDS}
	defer func() {
		if err != nil {
			r.closeListeners()
		}
	}()
	if r.extprocLn == nil {
		if r.extprocLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("ext_proc listener: %w", err)
		}
	}
	if r.trampLn == nil {
		if r.trampLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("trampoline listener: %w", err)
		}
	}
	c = c.withDefaults()
	if c.MaxRequestBody <= 0 {
		return nil, fmt.Errorf("max request body %d: want a positive number of bytes", c.MaxRequestBody)
	}
	if err := extproc.CheckRedirectBudget(c.Router.Config(), c.MaxRedirects); err != nil {
		return nil, err
	}
	sealer, err := attemptstate.NewSealer(c.Keys, attemptstate.SealerOptions{Clock: c.Clock})
	if err != nil {
		return nil, err
	}
	srv := extproc.NewServer(c.Router, sealer, extproc.Options{Clock: c.Clock, Logger: c.Logger, Metrics: extproc.NewMetrics(c.Registry),
		MaxRedirects: c.MaxRedirects, MaxRequestBody: c.MaxRequestBody, ClientAuth: c.ClientAuth})
	// The deployments' circuit, wait and in-flight gauges, read from the store per scrape.
	c.Registry.MustRegister(extproc.NewDeploymentCollector(c.Router, c.Logger))
	gs := grpc.NewServer(slices.Concat(c.ExtProcGRPC, srv.GRPCServerOptions(), keepalives())...)
	srv.Register(gs)
	r.ExtProc, r.grpc = srv, gs
	r.trampoline = &http.Server{Handler: srv.Trampoline(), ReadHeaderTimeout: 10 * time.Second}
	if r.xdsLn == nil {
		return r, nil
	}
	o := c.XDS
	o.Trampoline = c.TrampolineAdvertise
	if o.Trampoline == "" {
		o.Trampoline = r.trampLn.Addr().String()
	}
	// The route's redirect budget and body limit are the data plane's own, so Envoy and
	// switchyard can never disagree.
	o.MaxInternalRedirects = uint32(c.MaxRedirects)
	o.RequestBodyBufferLimit = uint64(c.MaxRequestBody)
	if r.XDS, err = xds.NewServer(c.Live, o, c.Logger, c.Registry, xds.ServerOptions{GRPC: c.XDSGRPC}); err != nil {
		return nil, fmt.Errorf("xDS server: %w", err)
	}
	return r, nil
}

func (c Config) withDefaults() Config {
	if c.MaxRedirects == 0 {
		c.MaxRedirects = contract.DefaultMaxRedirects
	}
	if c.MaxRequestBody == 0 {
		c.MaxRequestBody = contract.DefaultMaxRequestBody
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	return c
}

// Serve runs the servers until ctx is done (xDS) or Shutdown; the first error of any reaches errc
// (buffered by the caller: it is sent at most three times).
func (r *Replica) Serve(ctx context.Context, errc chan<- error) {
	if r.XDS != nil {
		xctx, cancel := context.WithCancel(ctx)
		r.stopXDS, r.xdsDone = cancel, make(chan struct{})
		go func() {
			defer close(r.xdsDone)
			if err := r.XDS.Serve(xctx, r.xdsLn); err != nil {
				errc <- fmt.Errorf("xDS server: %w", err)
			}
		}()
	}
	go func() {
		if err := r.grpc.Serve(r.extprocLn); err != nil {
			errc <- fmt.Errorf("ext_proc server: %w", err)
		}
	}()
	go func() {
		if err := r.trampoline.Serve(r.trampLn); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("trampoline: %w", err)
		}
	}()
}

// Shutdown stops accepting and lets in-flight streams and trampoline requests finish until
// ctx ends; whatever is still open then is cut, which releases its in-flight attempts. With
// a context already done it is a crash: every stream and connection ends at once.
func (r *Replica) Shutdown(ctx context.Context) {
	done := make(chan struct{})
	go func() { r.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		r.grpc.Stop()
	}
	if err := r.trampoline.Shutdown(ctx); err != nil {
		_ = r.trampoline.Close()
	}
	if r.stopXDS != nil {
		r.stopXDS()
		<-r.xdsDone
	}
	// A replica shut down before Serve still holds its listeners.
	r.closeListeners()
}

// Stop is Shutdown with a drain timeout: in-flight streams have drain to finish.
func (r *Replica) Stop(drain time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	r.Shutdown(ctx)
}

func (r *Replica) closeListeners() {
	for _, ln := range []net.Listener{r.extprocLn, r.trampLn, r.xdsLn} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// ExtProcAddr is the ext_proc server's address (Envoy's switchyard_extproc cluster).
func (r *Replica) ExtProcAddr() string { return r.extprocLn.Addr().String() }

// TrampolineAddr is the trampoline's listen address.
func (r *Replica) TrampolineAddr() string { return r.trampLn.Addr().String() }

// XDSAddr is the xDS server's address; empty without one.
func (r *Replica) XDSAddr() string {
	if r.xdsLn == nil {
		return ""
	}
	return r.xdsLn.Addr().String()
}
