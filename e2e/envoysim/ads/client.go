// Package ads owns envoysim's xDS client: it plays Envoy's side of one
// Aggregated Discovery Service stream (AggregatedDiscoveryService.StreamAggregatedResources,
// state-of-the-world, v3) against switchyard's xDS server and hands every accepted
// state of the world for clusters, endpoints and routes to a Handler.
//
// The protocol rules it imitates come from Envoy's "xDS REST and gRPC protocol"
// document (api/xds_protocol.rst, published as
// https://www.envoyproxy.io/docs/envoy/latest/api-docs/xds_protocol) and from Envoy's
// SotW mux, source/extensions/config_subscription/grpc/grpc_mux_impl.cc:
//
//   - CDS is subscribed first, in wildcard mode (empty resource_names); EDS and RDS
//     name the resources they want and are only requested once a name is known.
//   - Every response is ACKed or NACKed with a request of the same type carrying the
//     response's nonce. An ACK carries the response's version_info; a NACK carries
//     the previously accepted version and error_detail (code INTERNAL, as Envoy sets).
//   - node is sent on the first request of each stream only.
//   - Every request carries the last nonce seen for its type on the stream, so a
//     subscription change is not dropped by the server as stale.
//   - After the stream breaks, a new stream re-sends every subscribed type with its
//     current names and the last accepted version; nonces are per stream and start
//     empty.
//   - A response for a type URL the client never subscribed to is logged and ignored,
//     with no ACK or NACK, as Envoy's GrpcMuxImpl::onDiscoveryResponse does.
package ads

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Type URLs of the resources this client subscribes to.
const (
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	RouteType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"

	// resourceWrapperType is the envoy.service.discovery.v3.Resource envelope a server
	// uses when it attaches a TTL to a resource; Envoy unwraps it (DecodedResourceImpl).
	resourceWrapperType = "type.googleapis.com/envoy.service.discovery.v3.Resource"
)

// Envoy's xDS stream retry: jittered exponential backoff from 500 ms up to 30 s
// (RetryInitialDelayMs/RetryMaxDelayMs in
// source/extensions/config_subscription/grpc/grpc_stream.h).
const (
	defaultInitialBackoff = 500 * time.Millisecond
	defaultMaxBackoff     = 30 * time.Second
)

// maxErrorDetailBytes mirrors Config::Utility::truncateGrpcStatusMessage, which keeps
// NACK messages within 4 KiB so a huge error cannot blow up the request.
const maxErrorDetailBytes = 4096

// Handler applies configuration. Each call carries the full state of the world for
// that type: all clusters; for endpoints and routes, every subscribed resource the
// server sent (resources that were not subscribed are dropped first, as Envoy
// ignores them). Returning an error NACKs the response and keeps the previous
// version. Calls are serialised on the stream's goroutine, so a handler may call
// SubscribeEndpoints/SubscribeRoutes; the resulting request goes out after the
// ACK/NACK of the response being handled, as Envoy's paused mux does.
type Handler interface {
	// Each call carries the full state-of-the-world for that type; returning an error NACKs it.
	OnClusters(version string, clusters []*clusterv3.Cluster) error
	OnEndpoints(version string, assignments []*endpointv3.ClusterLoadAssignment) error
	OnRoutes(version string, routes []*routev3.RouteConfiguration) error
}

// Config configures a Client.
type Config struct {
	Conn    grpc.ClientConnInterface // connection to the xDS server
	Node    *corev3.Node
	Handler Handler
	Logger  *slog.Logger // optional

	// InitialBackoff and MaxBackoff bound the jittered exponential delay between
	// streams. Zero means Envoy's values (500 ms, 30 s); tests shorten them.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
}

// Client is an ADS client. Create it with New, start it with Run.
type Client struct {
	cfg     Config
	log     *slog.Logger
	running atomic.Bool
	// wake tells the running stream that a subscription changed; buffered so
	// Subscribe* never blocks and several changes collapse into one check.
	wake chan struct{}

	mu       sync.Mutex
	names    map[string][]string // EDS/RDS: wanted resource names, sorted and unique
	accepted map[string]string   // type URL -> last accepted version; survives reconnects
}

// New returns a Client for cfg. It does not connect; call Run.
func New(cfg Config) *Client {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.InitialBackoff <= 0 {
		cfg.InitialBackoff = defaultInitialBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = defaultMaxBackoff
	}
	if cfg.MaxBackoff < cfg.InitialBackoff {
		cfg.MaxBackoff = cfg.InitialBackoff
	}
	return &Client{
		cfg:      cfg,
		log:      log.With("component", "envoysim/ads"),
		wake:     make(chan struct{}, 1),
		names:    map[string][]string{},
		accepted: map[string]string{},
	}
}

// SubscribeEndpoints replaces the set of ClusterLoadAssignment names (EDS) the client
// wants. A changed set sends a new EDS request on the running stream; an empty set
// after a non-empty one unsubscribes from everything of that type.
func (c *Client) SubscribeEndpoints(clusterNames []string) {
	c.subscribe(EndpointType, clusterNames)
}

// SubscribeRoutes replaces the set of RouteConfiguration names (RDS) the client wants.
func (c *Client) SubscribeRoutes(routeConfigNames []string) {
	c.subscribe(RouteType, routeConfigNames)
}

// AcceptedVersions returns, per type URL, the version_info of the last response the
// handler accepted (the version the client ACKs with). Types never accepted are absent.
func (c *Client) AcceptedVersions() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]string, len(c.accepted))
	for k, v := range c.accepted {
		out[k] = v
	}
	return out
}

func (c *Client) subscribe(typeURL string, names []string) {
	set := slices.Clone(names)
	slices.Sort(set)
	set = slices.Compact(set)
	c.mu.Lock()
	changed := !slices.Equal(c.names[typeURL], set)
	c.names[typeURL] = set
	c.mu.Unlock()
	if changed {
		select {
		case c.wake <- struct{}{}:
		default: // a wake-up is already pending; it will see the new set
		}
	}
}

// Run keeps one ADS stream open, reconnecting with jittered exponential backoff
// whenever it breaks, until ctx is done; it then returns ctx.Err(). Only one Run may
// be active per Client.
func (c *Client) Run(ctx context.Context) error {
	if c.cfg.Conn == nil || c.cfg.Handler == nil {
		return errors.New("ads: Config.Conn and Config.Handler are required")
	}
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("ads: Run is already active on this client")
	}
	defer c.running.Store(false)

	next := c.cfg.InitialBackoff
	for {
		received, err := c.runStream(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Like Envoy's GrpcStream, a stream that delivered a message resets the
		// backoff: the server was healthy, so reconnect quickly.
		if received {
			next = c.cfg.InitialBackoff
		}
		// Full jitter, as JitteredExponentialBackOffStrategy::nextBackOffMs.
		delay := rand.N(next) + time.Millisecond
		next = min(next*2, c.cfg.MaxBackoff)
		c.log.Warn("ADS stream closed; reconnecting", "err", err, "delay", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// stream is the per-stream protocol state.
type stream struct {
	grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
	nodeSent bool
	nonce    map[string]string   // last nonce received per type on this stream
	sent     map[string][]string // names last sent per type; a key means "subscribed on this stream"
	recvErr  <-chan error
}

func (c *Client) runStream(ctx context.Context) (received bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // runs after cancel: the receiver must be gone before we return
	defer cancel()

	grpcStream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(c.cfg.Conn).StreamAggregatedResources(sctx)
	if err != nil {
		return false, fmt.Errorf("open ADS stream: %w", err)
	}
	responses := make(chan *discoveryv3.DiscoveryResponse)
	recvErr := make(chan error, 1)
	s := &stream{
		BidiStreamingClient: grpcStream,
		nonce:               map[string]string{},
		sent:                map[string][]string{},
		recvErr:             recvErr,
	}
	// The receiver reports exactly one error before it exits, so a failed Send can
	// always collect the stream's real status from recvErr.
	wg.Go(func() {
		for {
			resp, err := grpcStream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case responses <- resp:
			case <-sctx.Done():
				recvErr <- sctx.Err()
				return
			}
		}
	})

	// Envoy subscribes to CDS first (wildcard), then to whatever names are known.
	if err := c.sendRequest(s, ClusterType, nil); err != nil {
		return false, err
	}
	if err := c.syncSubscriptions(s); err != nil {
		return false, err
	}
	for {
		select {
		case <-ctx.Done():
			return received, ctx.Err()
		case err := <-recvErr:
			return received, fmt.Errorf("ADS stream receive: %w", err)
		case <-c.wake:
			if err := c.syncSubscriptions(s); err != nil {
				return received, err
			}
		case resp := <-responses:
			received = true
			if err := c.handleResponse(s, resp); err != nil {
				return received, err
			}
			// Subscription changes made by the handler go out after its ACK/NACK.
			if err := c.syncSubscriptions(s); err != nil {
				return received, err
			}
		}
	}
}

// syncSubscriptions sends an EDS or RDS request when the wanted names differ from
// what this stream last sent. A type never requested on this stream is only
// requested once it has a name: an empty first request would mean "wildcard".
func (c *Client) syncSubscriptions(s *stream) error {
	for _, typeURL := range []string{EndpointType, RouteType} {
		c.mu.Lock()
		want := c.names[typeURL]
		c.mu.Unlock()
		sent, subscribed := s.sent[typeURL]
		if (!subscribed && len(want) == 0) || (subscribed && slices.Equal(sent, want)) {
			continue
		}
		if err := c.sendRequest(s, typeURL, nil); err != nil {
			return err
		}
	}
	return nil
}

// sendRequest sends the current request for typeURL: current names, last accepted
// version, last nonce of this stream, node on the stream's first request, and
// errorDetail for a NACK.
func (c *Client) sendRequest(s *stream, typeURL string, errorDetail error) error {
	c.mu.Lock()
	names := slices.Clone(c.names[typeURL])
	version := c.accepted[typeURL]
	c.mu.Unlock()
	if typeURL == ClusterType {
		names = nil // Envoy always uses wildcard mode for CDS
	}
	req := &discoveryv3.DiscoveryRequest{
		VersionInfo:   version,
		ResourceNames: names,
		TypeUrl:       typeURL,
		ResponseNonce: s.nonce[typeURL],
	}
	if !s.nodeSent {
		req.Node = c.cfg.Node
	}
	if errorDetail != nil {
		msg := errorDetail.Error()
		if len(msg) > maxErrorDetailBytes {
			msg = msg[:maxErrorDetailBytes]
		}
		// A proto string must be UTF-8, or the request would fail to marshal and
		// take the stream down; the cut above may also split a rune.
		msg = strings.ToValidUTF8(msg, "\uFFFD")
		req.ErrorDetail = status.New(codes.Internal, msg).Proto()
	}
	if err := s.Send(req); err != nil {
		// io.EOF means the stream is gone; the reason arrives on Recv.
		if errors.Is(err, io.EOF) {
			err = <-s.recvErr
		}
		return fmt.Errorf("ADS stream send %s: %w", typeURL, err)
	}
	s.nodeSent = true
	s.sent[typeURL] = names
	c.log.Debug("sent DiscoveryRequest", "type", typeURL, "version", version,
		"nonce", req.ResponseNonce, "names", names, "nack", errorDetail != nil)
	return nil
}

// handleResponse applies one DiscoveryResponse and ACKs or NACKs it.
func (c *Client) handleResponse(s *stream, resp *discoveryv3.DiscoveryResponse) error {
	typeURL := resp.GetTypeUrl()
	if _, subscribed := s.sent[typeURL]; !subscribed {
		c.log.Warn("ignoring DiscoveryResponse for a type URL with no subscription",
			"type", typeURL, "version", resp.GetVersionInfo())
		return nil
	}
	s.nonce[typeURL] = resp.GetNonce()
	applyErr := c.apply(typeURL, resp)
	if applyErr == nil {
		c.mu.Lock()
		c.accepted[typeURL] = resp.GetVersionInfo()
		c.mu.Unlock()
		c.log.Debug("accepted config", "type", typeURL, "version", resp.GetVersionInfo())
	} else {
		c.log.Warn("rejected config", "type", typeURL, "version", resp.GetVersionInfo(), "err", applyErr)
	}
	return c.sendRequest(s, typeURL, applyErr)
}

func (c *Client) apply(typeURL string, resp *discoveryv3.DiscoveryResponse) error {
	switch typeURL {
	case ClusterType:
		clusters, heartbeat, err := decode(resp, func() *clusterv3.Cluster { return &clusterv3.Cluster{} })
		if err != nil || heartbeat {
			return err
		}
		return c.cfg.Handler.OnClusters(resp.GetVersionInfo(), clusters)
	case EndpointType:
		cla, heartbeat, err := decode(resp, func() *endpointv3.ClusterLoadAssignment { return &endpointv3.ClusterLoadAssignment{} })
		if err != nil || heartbeat {
			return err
		}
		cla = onlySubscribed(c, typeURL, cla, (*endpointv3.ClusterLoadAssignment).GetClusterName)
		return c.cfg.Handler.OnEndpoints(resp.GetVersionInfo(), cla)
	case RouteType:
		routes, heartbeat, err := decode(resp, func() *routev3.RouteConfiguration { return &routev3.RouteConfiguration{} })
		if err != nil || heartbeat {
			return err
		}
		routes = onlySubscribed(c, typeURL, routes, (*routev3.RouteConfiguration).GetName)
		return c.cfg.Handler.OnRoutes(resp.GetVersionInfo(), routes)
	default:
		// Unreachable: only the three types above are ever subscribed.
		return fmt.Errorf("unsupported type URL %q", typeURL)
	}
}

// onlySubscribed drops resources the client did not ask for: "The client will
// silently ignore any supplied resources that were not explicitly requested"
// (xds_protocol, "How the client specifies what resources to return").
func onlySubscribed[T any](c *Client, typeURL string, items []T, name func(T) string) []T {
	c.mu.Lock()
	want := c.names[typeURL]
	c.mu.Unlock()
	kept := make([]T, 0, len(items))
	var dropped []string
	for _, it := range items {
		if _, ok := slices.BinarySearch(want, name(it)); ok {
			kept = append(kept, it)
		} else {
			dropped = append(dropped, name(it))
		}
	}
	if len(dropped) > 0 {
		c.log.Debug("ignoring resources that were not requested", "type", typeURL, "names", dropped)
	}
	return kept
}
