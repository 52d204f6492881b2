package xds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/switchyard-gw/switchyard/routing/config"
)

// ServerOptions tune the ADS server beyond the resources.
type ServerOptions struct {
	// GRPC are extra gRPC server options, e.g. TLS credentials.
	GRPC []grpc.ServerOption
}

// nodeKey is the one SnapshotCache key: every Envoy gets the same snapshot.
const nodeKey = "switchyard"

// allNodes maps every Envoy node to nodeKey (cache.NodeHash).
type allNodes struct{}

func (allNodes) ID(*corev3.Node) string { return nodeKey }

// Server is switchyard's ADS server: it publishes Build(live.Load(), opts) to every Envoy
// and follows the live configuration. Only the AggregatedDiscoveryService is registered
// (the bootstrap's cds_config and rds config_source are ads).
type Server struct {
	live    *config.Live
	opts    Options
	sopts   ServerOptions
	log     *slog.Logger
	metrics *metrics
	cache   cache.SnapshotCache
	// build is Build; tests swap it to publish a resource Envoy rejects.
	build func(*config.Snapshot, Options) (*cache.Snapshot, []Omission, error)

	// The versions published and last failed; only publish touches them (Serve, then its
	// follow loop, one at a time).
	published, failed uint64

	mu    sync.Mutex
	state Publication // publish writes it; Publication reads it from any goroutine
}

// Publication is what the server publishes now, for /readyz and the status view.
type Publication struct {
	// Published is the configuration version of the snapshot in force (0: none yet).
	Published uint64
	// Failed is the last version that could not be published at all, when newer than
	// Published (else 0); Err says why.
	Failed uint64
	Err    string
	// Omitted are the deployments left out of the snapshot in force, by id: why each
	// cluster did not build (never a key: the base URL is not repeated).
	Omitted map[string]string
}

// Publication returns the current publication state (a copy).
func (s *Server) Publication() Publication {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.state
	p.Omitted = maps.Clone(p.Omitted)
	return p
}

// NewServer returns an ADS server for live with the resource options o, logging to log
// and registering its metrics (switchyard_xds_*) with reg (nil: not registered). It checks
// o at once, so a bad flag fails at start.
func NewServer(live *config.Live, o Options, log *slog.Logger, reg prometheus.Registerer, so ...ServerOptions) (*Server, error) {
	if _, err := o.withDefaults(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var sopts ServerOptions
	if len(so) > 0 {
		sopts = so[0]
	}
	return &Server{
		live: live, opts: o, sopts: sopts, log: log, metrics: newMetrics(reg),
		// ADS mode: responses wait until the Envoy asked for every resource type in order.
		cache: cache.NewSnapshotCache(true, allNodes{}, nil),
		build: Build,
	}, nil
}

// Serve publishes the current configuration, then serves ADS on ln and follows the live
// configuration until ctx is done; it then closes the streams and returns nil. A late or
// reconnecting Envoy gets the snapshot in force when it subscribes (the SnapshotCache
// answers a new stream with the current snapshot).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.publish(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// go-control-plane's example server (internal/example/server.go) settings: pings every
	// 30 s find dead Envoys, and Envoys may ping as often (their own keepalives).
	gopts := append([]grpc.ServerOption{
		grpc.MaxConcurrentStreams(1 << 20),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 5 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 30 * time.Second, PermitWithoutStream: true}),
	}, s.sopts.GRPC...)
	gs := grpc.NewServer(gopts...)
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, serverv3.NewServer(ctx, s.cache, s.callbacks()))
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.follow(ctx)
	}()
	errc := make(chan error, 1)
	go func() { errc <- gs.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
		// The server's context ends every ADS stream, so GracefulStop does not wait on them.
		gs.GracefulStop()
		err = <-errc
	case err = <-errc:
	}
	cancel()
	<-done
	if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("xds: serving: %w", err)
	}
	return nil
}

// follow publishes every new configuration version until ctx is done, when the live
// configuration says it changed (config.Live.Changed).
func (s *Server) follow(ctx context.Context) {
	for {
		changed := s.live.Changed()
		s.publish(ctx)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// publish publishes the live configuration if its version is not the one published. A
// version that does not build is logged and counted once, and the previous snapshot stays
// published. A deployment left out of the snapshot (Build's omitted) is logged and counted
// when it is first left out or its reason changes, not on every version. Only Serve and
// its follow loop call it, one at a time.
func (s *Server) publish(ctx context.Context) {
	snap := s.live.Load()
	if snap == nil || snap.Version == s.published || snap.Version == s.failed {
		return
	}
	out, omitted, err := s.build(snap, s.opts)
	if err == nil {
		err = s.cache.SetSnapshot(ctx, nodeKey, out)
	}
	if err != nil {
		s.failed = snap.Version
		s.metrics.buildErrors.Inc()
		s.log.Error("xds: configuration not published; Envoys keep the previous snapshot",
			"version", snap.Version, "published", s.published, "err", err)
		s.mu.Lock()
		s.state.Failed, s.state.Err = snap.Version, err.Error()
		s.mu.Unlock()
		return
	}
	now := make(map[string]string, len(omitted))
	for _, o := range omitted {
		now[o.ID] = o.Err.Error()
	}
	s.mu.Lock()
	before := s.state.Omitted
	s.state = Publication{Published: snap.Version, Omitted: now}
	s.mu.Unlock()
	for id, why := range now {
		if before[id] != why {
			s.metrics.omissions.Inc()
			s.log.Error("xds: deployment left out of the snapshot; Envoys get no cluster for it",
				"deployment", id, "version", snap.Version, "err", why)
		}
	}
	for id := range before {
		if _, still := now[id]; !still {
			s.log.Info("xds: deployment back in the snapshot (or removed)", "deployment", id, "version", snap.Version)
		}
	}
	s.published = snap.Version
	s.metrics.version.Set(float64(snap.Version))
	s.metrics.omitted.Set(float64(len(now)))
	s.log.Info("xds: snapshot published", "version", snap.Version, "clusters", len(snap.Deployments)-len(now), "omitted", len(now))
}

// callbacks log and count NACKs: a request carrying error_detail rejects the response of
// its response_nonce; Envoy keeps its previous resources of that type
// (xds_protocol.rst "ACK and NACK semantics"), and so does the cache (nothing is rolled
// back: the next configuration version is the fix).
func (s *Server) callbacks() serverv3.Callbacks {
	return serverv3.CallbackFuncs{
		StreamRequestFunc: func(stream int64, r *discoveryv3.DiscoveryRequest) error {
			if d := r.GetErrorDetail(); d != nil {
				s.metrics.nacks.WithLabelValues(r.GetTypeUrl()).Inc()
				s.log.Warn("xds: Envoy rejected a response (NACK); it keeps its previous resources",
					"node", r.GetNode().GetId(), "stream", stream, "type_url", r.GetTypeUrl(),
					"accepted_version", r.GetVersionInfo(), "nonce", r.GetResponseNonce(), "error", d.GetMessage())
			}
			return nil
		},
	}
}
