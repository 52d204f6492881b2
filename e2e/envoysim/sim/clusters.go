package sim

import (
	"crypto/tls"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/upstreamtls"
)

type lbPolicy int

const (
	lbRoundRobin lbPolicy = iota
	lbLeastRequest
	lbRandom
)

type upstreamProtocol int

const (
	protoHTTP1 upstreamProtocol = iota
	protoHTTP2
	protoAuto // ALPN over TLS, HTTP/1.1 in plaintext (AutoHttpConfig)
)

const httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

// tlsSetting is the client TLS config of a host, nil for plaintext.
type tlsSetting struct {
	cfg *tls.Config
}

// cluster is a compiled Cluster (upstream cluster manager entry).
type cluster struct {
	name           string
	pb             *clusterv3.Cluster
	edsName        string
	isEDS          bool
	isDNS          bool
	static         bool
	connectTimeout time.Duration
	lbPolicy       lbPolicy
	protocol       upstreamProtocol
	// upstreamFilters is HttpProtocolOptions.http_filters without the final
	// upstream_codec; nil means "not configured" (the router's
	// upstream_http_filters then apply).
	upstreamFilters []*httpFilter
	hasFilterConfig bool
	// The DEFAULT priority's circuit breakers (resources.go).
	pending, requests, retries resource
	metadata                   *corev3.Metadata
	network                    string
	hosts                      atomic.Pointer[hostSet]
}

// buildCluster compiles a cluster, rejecting what envoysim does not implement the way
// Envoy rejects invalid clusters (ClusterManagerImpl / ClusterImplBase constructors).
func (s *Sim) buildCluster(pb *clusterv3.Cluster, static bool) (*cluster, error) {
	c := &cluster{
		name:           pb.GetName(),
		pb:             pb,
		static:         static,
		connectTimeout: 5 * time.Second, // Cluster.connect_timeout default
		pending:        resource{max: defaultResourceMax},
		requests:       resource{max: defaultResourceMax},
		retries:        resource{max: defaultMaxRetries},
		metadata:       pb.GetMetadata(),
		network:        "tcp",
	}
	if pb.GetConnectTimeout() != nil {
		c.connectTimeout = pb.GetConnectTimeout().AsDuration()
	}
	switch pb.GetType() {
	case clusterv3.Cluster_STATIC:
	case clusterv3.Cluster_STRICT_DNS, clusterv3.Cluster_LOGICAL_DNS:
		c.isDNS = true
	case clusterv3.Cluster_EDS:
		c.isEDS = true
		if pb.GetEdsClusterConfig().GetEdsConfig().GetAds() == nil {
			return nil, fmt.Errorf("cluster %q: eds_cluster_config.eds_config: only ads {} is supported by envoysim", c.name)
		}
		c.edsName = pb.GetEdsClusterConfig().GetServiceName()
		if c.edsName == "" {
			c.edsName = c.name
		}
		if pb.GetLoadAssignment() != nil {
			return nil, fmt.Errorf("cluster %q: load_assignment is not used by EDS clusters (envoysim rejects it)", c.name)
		}
	default:
		return nil, fmt.Errorf("cluster %q: type %s is not supported by envoysim", c.name, pb.GetType())
	}
	switch pb.GetLbPolicy() {
	case clusterv3.Cluster_ROUND_ROBIN:
	case clusterv3.Cluster_LEAST_REQUEST:
		c.lbPolicy = lbLeastRequest
	case clusterv3.Cluster_RANDOM:
		c.lbPolicy = lbRandom
	default:
		return nil, fmt.Errorf("cluster %q: lb_policy %s is not supported by envoysim", c.name, pb.GetLbPolicy())
	}
	switch pb.GetDnsLookupFamily() {
	case clusterv3.Cluster_V4_ONLY:
		c.network = "tcp4"
	case clusterv3.Cluster_V6_ONLY:
		c.network = "tcp6"
	}
	// "If multiple Thresholds are defined with the same RoutingPriority, the first one in
	// the list is used" (circuit_breaker.proto).
	for _, t := range pb.GetCircuitBreakers().GetThresholds() {
		if t.GetPriority() != corev3.RoutingPriority_DEFAULT {
			continue
		}
		if t.GetMaxRetries() != nil {
			c.retries.max = int64(t.GetMaxRetries().GetValue())
		}
		if t.GetMaxPendingRequests() != nil {
			c.pending.max = int64(t.GetMaxPendingRequests().GetValue())
		}
		if t.GetMaxRequests() != nil {
			c.requests.max = int64(t.GetMaxRequests().GetValue())
		}
		break
	}
	if err := upstreamtls.ValidateCluster(pb); err != nil {
		return nil, err
	}
	if err := s.compileProtocolOptions(c); err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.name, err)
	}
	if !c.isEDS {
		cla := pb.GetLoadAssignment()
		if addr, ok := s.opts.clusterAddrs[c.name]; ok {
			cla = overrideAddress(c.name, addr)
		}
		hs, err := c.buildHosts(cla)
		if err != nil {
			return nil, err
		}
		c.hosts.Store(hs)
	}
	return c, nil
}

// compileProtocolOptions reads typed_extension_protocol_options
// ["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].
func (s *Sim) compileProtocolOptions(c *cluster) error {
	anyOpts, ok := c.pb.GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey]
	if !ok {
		return nil
	}
	msg, err := anyOpts.UnmarshalNew()
	if err != nil {
		return err
	}
	opts, ok := msg.(*httpv3.HttpProtocolOptions)
	if !ok {
		return fmt.Errorf("typed_extension_protocol_options[%q] has type %T", httpProtocolOptionsKey, msg)
	}
	switch p := opts.GetUpstreamProtocolOptions().(type) {
	case *httpv3.HttpProtocolOptions_ExplicitHttpConfig_:
		if p.ExplicitHttpConfig.GetHttp2ProtocolOptions() != nil {
			c.protocol = protoHTTP2
		}
	case *httpv3.HttpProtocolOptions_AutoConfig:
		c.protocol = protoAuto
	case nil:
	default:
		return fmt.Errorf("upstream protocol option %T is not supported by envoysim", p)
	}
	if len(opts.GetHttpFilters()) > 0 {
		c.hasFilterConfig = true
		fs, err := s.compileHTTPFilters(opts.GetHttpFilters(), true)
		if err != nil {
			return err
		}
		c.upstreamFilters = fs
	}
	return nil
}

func overrideAddress(name, addr string) *endpointv3.ClusterLoadAssignment {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: name,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
					Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
						Address:       host,
						PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(p)},
					}}},
				}},
			}},
		}},
	}
}

// buildHosts compiles a ClusterLoadAssignment into priorities.
func (c *cluster) buildHosts(cla *endpointv3.ClusterLoadAssignment) (*hostSet, error) {
	hs := &hostSet{overprovision: defaultOverprovisioning, rrCurrent: map[*host]int{}}
	if f := cla.GetPolicy().GetOverprovisioningFactor(); f != nil {
		hs.overprovision = int(f.GetValue())
	}
	for _, lle := range cla.GetEndpoints() {
		p := int(lle.GetPriority())
		for len(hs.priorities) <= p {
			hs.priorities = append(hs.priorities, nil)
		}
		for _, lbe := range lle.GetLbEndpoints() {
			ep := lbe.GetEndpoint()
			if ep == nil {
				return nil, fmt.Errorf("cluster %q: lb_endpoints: only endpoint is supported by envoysim", c.name)
			}
			sa := ep.GetAddress().GetSocketAddress()
			if sa == nil {
				return nil, fmt.Errorf("cluster %q: endpoint address: only socket_address is supported", c.name)
			}
			if sa.GetProtocol() != corev3.SocketAddress_TCP {
				return nil, fmt.Errorf("cluster %q: endpoint address: only TCP is supported", c.name)
			}
			if !c.isDNS && net.ParseIP(sa.GetAddress()) == nil {
				// STATIC and EDS hosts must be IP addresses (Network::Utility::parseInternetAddress).
				return nil, fmt.Errorf("cluster %q: malformed IP address: %s", c.name, sa.GetAddress())
			}
			h := &host{
				cluster:  c,
				address:  net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))),
				hostname: ep.GetHostname(),
				priority: p,
				weight:   1,
				metadata: lbe.GetMetadata(),
			}
			if c.isDNS && h.hostname == "" {
				h.hostname = sa.GetAddress()
			}
			if w := lbe.GetLoadBalancingWeight(); w != nil && w.GetValue() > 0 {
				h.weight = int(w.GetValue())
			}
			// UNKNOWN and HEALTHY (and DEGRADED, which envoysim treats as healthy)
			// receive traffic; UNHEALTHY, DRAINING and TIMEOUT do not.
			switch lbe.GetHealthStatus() {
			case corev3.HealthStatus_UNHEALTHY, corev3.HealthStatus_DRAINING, corev3.HealthStatus_TIMEOUT:
			default:
				h.healthy = true
			}
			ts := upstreamtls.Select(c.pb, lbe.GetMetadata())
			cfg, err := upstreamtls.ClientConfigForHost(ts, h.hostname)
			if err != nil {
				return nil, fmt.Errorf("cluster %q: transport socket for %s: %w", c.name, h.address, err)
			}
			if cfg != nil {
				if len(cfg.NextProtos) == 0 {
					// Envoy's connection pools offer ALPN for the cluster's protocol when
					// the TLS context sets none.
					switch c.protocol {
					case protoHTTP2:
						cfg.NextProtos = []string{"h2"}
					case protoAuto:
						cfg.NextProtos = []string{"h2", "http/1.1"}
					}
				}
				h.tls = &tlsSetting{cfg: cfg}
			}
			hs.priorities[p] = append(hs.priorities[p], h)
			hs.totalHostCount++
		}
	}
	return hs, nil
}

// clusterManager holds the active clusters (Upstream::ClusterManagerImpl). EDS
// clusters stay warming, invisible to the router, until their first assignment
// arrives (cluster warming, docs/root/intro/arch_overview/upstream/cluster_manager.rst).
type clusterManager struct {
	mu          sync.RWMutex
	static      map[string]*cluster
	dynamic     map[string]*cluster
	warming     map[string]*cluster
	assignments map[string]*endpointv3.ClusterLoadAssignment
	changed     chan struct{} // closed and replaced on every change
}

func newClusterManager() *clusterManager {
	return &clusterManager{
		static:      map[string]*cluster{},
		dynamic:     map[string]*cluster{},
		warming:     map[string]*cluster{},
		assignments: map[string]*endpointv3.ClusterLoadAssignment{},
		changed:     make(chan struct{}),
	}
}

func (cm *clusterManager) notifyLocked() {
	close(cm.changed)
	cm.changed = make(chan struct{})
}

// get returns an active cluster.
func (cm *clusterManager) get(name string) *cluster {
	cm.mu.RLock()
	defer cm.mu.RUnlock()
	if c, ok := cm.static[name]; ok {
		return c
	}
	return cm.dynamic[name]
}

func (cm *clusterManager) addStatic(c *cluster) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	if c.isEDS {
		cm.warming[c.name] = c
	} else {
		cm.static[c.name] = c
	}
	cm.notifyLocked()
}

// applyCDS replaces the dynamic clusters with a new state of the world. Clusters
// whose config did not change keep their hosts.
func (cm *clusterManager) applyCDS(clusters []*cluster) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	next := map[string]*cluster{}
	nextWarming := map[string]*cluster{}
	for _, c := range clusters {
		if _, isStatic := cm.static[c.name]; isStatic {
			continue // CDS cannot replace a static cluster
		}
		if c.isEDS {
			if cla, ok := cm.assignments[c.edsName]; ok {
				if hs, err := c.buildHosts(cla); err == nil {
					c.hosts.Store(hs)
					next[c.name] = c
					continue
				}
			}
			nextWarming[c.name] = c
			continue
		}
		next[c.name] = c
	}
	for name, c := range cm.warming {
		if c.static {
			nextWarming[name] = c
		}
	}
	cm.dynamic = next
	cm.warming = nextWarming
	cm.notifyLocked()
}

// applyEDS installs assignments. Hosts of every cluster using them are rebuilt and
// warming clusters become active.
func (cm *clusterManager) applyEDS(clas []*endpointv3.ClusterLoadAssignment) error {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	type update struct {
		c  *cluster
		hs *hostSet
	}
	var updates []update
	byName := map[string]*endpointv3.ClusterLoadAssignment{}
	for _, cla := range clas {
		byName[cla.GetClusterName()] = cla
	}
	all := append(append(slices.Collect(maps.Values(cm.dynamic)), slices.Collect(maps.Values(cm.warming))...), slices.Collect(maps.Values(cm.static))...)
	for _, c := range all {
		if !c.isEDS {
			continue
		}
		cla, ok := byName[c.edsName]
		if !ok {
			continue
		}
		hs, err := c.buildHosts(cla)
		if err != nil {
			return err
		}
		updates = append(updates, update{c, hs})
	}
	for n, cla := range byName {
		cm.assignments[n] = cla
	}
	for _, u := range updates {
		u.c.hosts.Store(u.hs)
		if _, ok := cm.warming[u.c.name]; ok {
			delete(cm.warming, u.c.name)
			if u.c.static {
				cm.static[u.c.name] = u.c
			} else {
				cm.dynamic[u.c.name] = u.c
			}
		}
	}
	cm.notifyLocked()
	return nil
}

// edsNames lists the EDS service names the clusters need.
func (cm *clusterManager) edsNames() []string {
	cm.mu.RLock()
	defer cm.mu.RUnlock()
	set := map[string]bool{}
	for _, m := range []map[string]*cluster{cm.static, cm.dynamic, cm.warming} {
		for _, c := range m {
			if c.isEDS {
				set[c.edsName] = true
			}
		}
	}
	out := slices.Collect(maps.Keys(set))
	slices.Sort(out)
	return out
}

// bump wakes WaitFor* callers after a non-cluster change (RDS).
func (cm *clusterManager) bump() {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	cm.notifyLocked()
}

func (cm *clusterManager) waitChan() <-chan struct{} {
	cm.mu.RLock()
	defer cm.mu.RUnlock()
	return cm.changed
}
