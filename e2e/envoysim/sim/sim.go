package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/ads"
)

// Option configures a Sim.
type Option func(*options)

type options struct {
	listenerAddrs map[string]string
	clusterAddrs  map[string]string
	log           *slog.Logger
	accessLog     func(AccessLogEntry)
	adsBackoff    time.Duration
}

// WithListenerAddress makes listener name bind addr ("127.0.0.1:0" picks a free port;
// read it back with Addr). The name "admin" overrides the admin address.
func WithListenerAddress(listener, addr string) Option {
	return func(o *options) { o.listenerAddrs[listener] = addr }
}

// WithClusterAddress replaces the endpoints of the bootstrap's static cluster with a
// single endpoint at addr (host:port), e.g. to point the ext_proc or xDS cluster at
// a test server.
func WithClusterAddress(cluster, addr string) Option {
	return func(o *options) { o.clusterAddrs[cluster] = addr }
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithAccessLog calls fn once per finished downstream stream (each internal redirect
// pass is its own stream, as in Envoy).
func WithAccessLog(fn func(AccessLogEntry)) Option { return func(o *options) { o.accessLog = fn } }

// WithADSInitialBackoff shortens the ADS reconnect back-off (Envoy: 500 ms).
func WithADSInitialBackoff(d time.Duration) Option { return func(o *options) { o.adsBackoff = d } }

// Sim is a running envoysim built from one bootstrap.
type Sim struct {
	bs   *bootstrapv3.Bootstrap
	opts options
	log  *slog.Logger

	cm        *clusterManager
	grpc      *grpcConns
	stats     counters
	listeners []*listener
	rds       []*hcmConfig // HCMs whose routes come from RDS
	adsClient *ads.Client
	adsConn   interface{ Close() error }

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	started bool
	closed  bool
	admin   *http.Server
}

// New compiles bs. Every field envoysim does not implement has already been rejected
// by Load; New rejects semantic problems (unknown clusters, bad filter chains) the
// way Envoy refuses to start.
func New(bs *bootstrapv3.Bootstrap, opts ...Option) (*Sim, error) {
	o := options{listenerAddrs: map[string]string{}, clusterAddrs: map[string]string{}}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	s := &Sim{bs: bs, opts: o, log: o.log.With("component", "envoysim"), cm: newClusterManager()}
	s.grpc = &grpcConns{s: s, conns: map[string]*grpcConn{}}
	if err := validateResource(bs, ""); err != nil {
		return nil, fmt.Errorf("envoysim: bootstrap: %w", err)
	}
	for _, cpb := range bs.GetStaticResources().GetClusters() {
		c, err := s.buildCluster(cpb, true)
		if err != nil {
			return nil, fmt.Errorf("envoysim: %w", err)
		}
		if s.cm.get(c.name) != nil {
			return nil, fmt.Errorf("envoysim: duplicate cluster %q", c.name)
		}
		s.cm.addStatic(c)
		if err := s.checkFilterClusters(c.upstreamFilters); err != nil {
			return nil, fmt.Errorf("envoysim: cluster %q: %w", c.name, err)
		}
	}
	if err := s.compileDynamicResources(); err != nil {
		return nil, err
	}
	for _, lpb := range bs.GetStaticResources().GetListeners() {
		l, err := s.buildListener(lpb)
		if err != nil {
			return nil, fmt.Errorf("envoysim: listener %q: %w", lpb.GetName(), err)
		}
		s.listeners = append(s.listeners, l)
	}
	return s, nil
}

// checkFilterClusters imitates Envoy's config-time check that an envoy_grpc cluster
// exists (Grpc::AsyncClientManager::factoryForGrpcService: "Unknown gRPC client
// cluster"). ext_proc clusters must be static clusters of the bootstrap.
func (s *Sim) checkFilterClusters(fs []*httpFilter) error {
	for _, f := range fs {
		if s.cm.get(f.extproc.GrpcCluster) == nil || !s.cm.get(f.extproc.GrpcCluster).static {
			return fmt.Errorf("http filter %q: unknown gRPC client cluster %q (envoysim needs a static cluster)", f.name, f.extproc.GrpcCluster)
		}
	}
	return nil
}

func (s *Sim) compileDynamicResources() error {
	dr := s.bs.GetDynamicResources()
	if dr == nil {
		return nil
	}
	ac := dr.GetAdsConfig()
	if dr.GetCdsConfig() != nil && dr.GetCdsConfig().GetAds() == nil {
		return errors.New("envoysim: dynamic_resources.cds_config: only ads {} is supported")
	}
	if ac == nil {
		if dr.GetCdsConfig() != nil {
			return errors.New("envoysim: dynamic_resources.cds_config uses ADS but ads_config is not set")
		}
		return nil
	}
	if ac.GetApiType() != corev3.ApiConfigSource_GRPC {
		return fmt.Errorf("envoysim: ads_config.api_type %s is not supported (GRPC only)", ac.GetApiType())
	}
	if len(ac.GetGrpcServices()) != 1 || ac.GetGrpcServices()[0].GetEnvoyGrpc() == nil {
		return errors.New("envoysim: ads_config.grpc_services must have exactly one envoy_grpc service")
	}
	if ac.GetGrpcServices()[0].GetEnvoyGrpc().GetMaxReceiveMessageLength() != nil {
		return errors.New("envoysim: ads_config: envoy_grpc.max_receive_message_length is not supported (ext_proc only)")
	}
	cl := ac.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName()
	if c := s.cm.get(cl); c == nil || !c.static {
		return fmt.Errorf("envoysim: ads_config: unknown gRPC client cluster %q", cl)
	}
	return nil
}

// Start binds the listeners and starts serving, and starts the ADS client when the
// bootstrap has dynamic_resources. It returns once the listeners accept connections.
func (s *Sim) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("envoysim: already started")
	}
	s.started = true
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for _, l := range s.listeners {
		if err := l.start(s); err != nil {
			s.closeLocked()
			return err
		}
	}
	if err := s.startAdmin(); err != nil {
		s.closeLocked()
		return err
	}
	if err := s.startADS(); err != nil {
		s.closeLocked()
		return err
	}
	return nil
}

// Addr returns the bound address (host:port) of a listener, "" if unknown or not started.
func (s *Sim) Addr(listenerName string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.listeners {
		if l.name == listenerName && l.ln != nil {
			return l.ln.Addr().String()
		}
	}
	return ""
}

// AdminAddr returns the bound admin address, "" when the bootstrap has no admin.
func (s *Sim) AdminAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admin == nil {
		return ""
	}
	return s.admin.Addr
}

// WaitForClusters blocks until every named cluster is active (static, or received
// over CDS and, for EDS clusters, warmed by its first assignment).
func (s *Sim) WaitForClusters(ctx context.Context, names ...string) error {
	for {
		ch := s.cm.waitChan()
		missing := ""
		for _, n := range names {
			if s.cm.get(n) == nil {
				missing = n
				break
			}
		}
		if missing == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("envoysim: waiting for cluster %q: %w", missing, ctx.Err())
		case <-ch:
		}
	}
}

// WaitForRouteConfigs blocks until every named RDS route configuration was received.
func (s *Sim) WaitForRouteConfigs(ctx context.Context, names ...string) error {
	for {
		ch := s.cm.waitChan()
		missing := ""
		for _, n := range names {
			found := false
			for _, h := range s.rds {
				if h.rdsName == n && h.routes.Load() != nil {
					found = true
				}
			}
			if !found {
				missing = n
				break
			}
		}
		if missing == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("envoysim: waiting for route configuration %q: %w", missing, ctx.Err())
		case <-ch:
		}
	}
}

// Close stops listeners, the ADS client and in-flight streams.
func (s *Sim) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
}

func (s *Sim) closeLocked() {
	if s.closed {
		return
	}
	s.closed = true
	if s.cancel != nil {
		s.cancel()
	}
	for _, l := range s.listeners {
		l.close()
	}
	if s.admin != nil {
		_ = s.admin.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.mu.Lock()
	if s.adsConn != nil {
		_ = s.adsConn.Close()
	}
	s.grpc.closeAll()
}

// startAdmin serves Envoy's /ready on admin.address (LIVE once started).
func (s *Sim) startAdmin() error {
	sa := s.bs.GetAdmin().GetAddress().GetSocketAddress()
	if sa == nil {
		return nil
	}
	addr := net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue())))
	if a, ok := s.opts.listenerAddrs["admin"]; ok {
		addr = a
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("envoysim: admin listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("LIVE\n"))
	})
	s.admin = &http.Server{Addr: ln.Addr().String(), Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = s.admin.Serve(ln)
	}()
	return nil
}
