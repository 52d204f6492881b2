package sim

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// host is one upstream endpoint of a cluster.
type host struct {
	cluster  *cluster
	address  string // host:port to dial
	hostname string // Endpoint.hostname, or the DNS name of a DNS cluster
	priority int
	weight   int
	healthy  bool
	metadata *corev3.Metadata
	tls      *tlsSetting
	active   atomic.Int64 // requests in flight (LEAST_REQUEST)
}

// hostSet is a cluster's hosts per priority (Envoy's PrioritySet).
type hostSet struct {
	priorities     [][]*host
	overprovision  int // ClusterLoadAssignment.Policy.overprovisioning_factor, default 140
	rrMu           sync.Mutex
	rrCurrent      map[*host]int // smooth weighted round robin state per host
	totalHostCount int
}

// Envoy's defaults: overprovisioning_factor 140 (endpoint.proto), healthy panic
// threshold 50% (cluster.proto CommonLbConfig.healthy_panic_threshold).
const (
	defaultOverprovisioning = 140
	panicThreshold          = 50
)

// health imitates LoadBalancerBase::recalculatePerPriorityState:
// min(100, overprovisioning_factor * healthy / total) per priority.
func (hs *hostSet) health() []int {
	out := make([]int, len(hs.priorities))
	for p, hosts := range hs.priorities {
		if len(hosts) == 0 {
			continue
		}
		healthy := 0
		for _, h := range hosts {
			if h.healthy {
				healthy++
			}
		}
		out[p] = min(100, hs.overprovision*healthy/len(hosts))
	}
	return out
}

// priorityLoad imitates LoadBalancerBase::recalculatePriorityLoad / distributeLoad:
// load goes to the highest priorities up to their health; rounding leftovers go to
// the first available priority; when nothing is available all load goes to P0.
func priorityLoad(health []int) []int {
	load := make([]int, len(health))
	total := 0
	for _, h := range health {
		total += h
	}
	total = min(total, 100)
	if total == 0 {
		if len(load) > 0 {
			load[0] = 100
		}
		return load
	}
	remaining := 100
	first := -1
	for i, h := range health {
		if first < 0 && h > 0 {
			first = i
		}
		d := min(remaining, h*100/total)
		load[i] = d
		remaining -= d
	}
	if first >= 0 {
		load[first] += remaining
	}
	return load
}

// previousPriorities imitates the envoy.retry_priorities.previous_priorities plugin
// (source/extensions/retry/priority/previous_priorities/previous_priorities.cc).
type previousPriorities struct {
	updateFrequency int
	attempted       []*host
	excluded        []bool
	load            []int
}

func (pp *previousPriorities) onHostAttempted(h *host) { pp.attempted = append(pp.attempted, h) }

// determinePriorityLoad imitates PreviousPrioritiesRetryPriority::determinePriorityLoad.
func (pp *previousPriorities) determinePriorityLoad(health, original []int) []int {
	if len(pp.attempted) < pp.updateFrequency {
		return original
	}
	if len(pp.attempted)%pp.updateFrequency == 0 {
		if len(pp.excluded) < len(health) {
			pp.excluded = append(pp.excluded, make([]bool, len(health)-len(pp.excluded))...)
		}
		for _, h := range pp.attempted {
			if h.priority < len(pp.excluded) {
				pp.excluded[h.priority] = true
			}
		}
		if !pp.adjust(health) {
			return original
		}
	}
	if pp.load == nil {
		return original
	}
	return pp.load
}

func (pp *previousPriorities) availability(health []int) ([]int, int) {
	adj := make([]int, len(health))
	total := 0
	for i, h := range health {
		if i < len(pp.excluded) && pp.excluded[i] {
			continue
		}
		adj[i] = h
		total += h
	}
	return adj, min(total, 100)
}

func (pp *previousPriorities) adjust(health []int) bool {
	adj, total := pp.availability(health)
	if total == 0 {
		// Envoy's reset loop iterates over copies of the flags ("for (auto
		// excluded_priority : excluded_priorities_) excluded_priority = false;"), so
		// only attempted_hosts_ is cleared and the original load is used. Imitated.
		pp.attempted = nil
		adj, total = pp.availability(health)
	}
	if total == 0 {
		return false
	}
	load := make([]int, len(health))
	remaining := 100
	for remaining != 0 {
		for i := range adj {
			d := min(remaining, adj[i]*100/total)
			load[i] += d
			remaining -= d
		}
	}
	pp.load = load
	return true
}

// lbContext is the per-request load balancer context (the router is Envoy's
// LoadBalancerContext): retry plugins see every attempted host.
type lbContext struct {
	isRetry            bool
	priority           *previousPriorities
	previousHosts      bool
	hostSelectAttempts int // host_selection_retry_max_attempts (default 1)
	attempted          map[*host]bool
}

// onHostAttempted imitates RetryState::onHostAttempted, which feeds the retry plugins.
func (lc *lbContext) onHostAttempted(h *host) {
	if lc.attempted == nil {
		lc.attempted = map[*host]bool{}
	}
	lc.attempted[h] = true
	if lc.priority != nil {
		lc.priority.onHostAttempted(h)
	}
}

// chooseHost imitates ZoneAwareLoadBalancerBase::chooseHost plus the router's retry
// host predicate loop (previous_hosts: re-pick up to host_selection_retry_max_attempts).
func (c *cluster) chooseHost(lc *lbContext) *host {
	hs := c.hosts.Load()
	if hs == nil || hs.totalHostCount == 0 {
		return nil
	}
	attempts := 1
	if lc != nil && lc.isRetry && lc.previousHosts {
		attempts = max(lc.hostSelectAttempts, 1) + 1
	}
	var h *host
	for i := 0; i < attempts; i++ {
		h = c.chooseOnce(hs, lc)
		if h == nil || lc == nil || !lc.isRetry || !lc.previousHosts || !lc.attempted[h] {
			return h
		}
	}
	return h
}

// chooseOnce imitates one LoadBalancerBase::chooseHost: a priority drawn from the
// priority load (or the retry priority plugin's), then a host of that priority by the
// cluster's lb_policy.
func (c *cluster) chooseOnce(hs *hostSet, lc *lbContext) *host {
	health := hs.health()
	load := priorityLoad(health)
	if lc != nil && lc.isRetry && lc.priority != nil {
		load = lc.priority.determinePriorityLoad(health, load)
	}
	r := rand.IntN(100)
	p := 0
	for i, l := range load {
		if r < l {
			p = i
			break
		}
		r -= l
	}
	hosts := hs.priorities[p]
	if len(hosts) == 0 {
		return nil
	}
	// Panic mode: below the healthy panic threshold every host is a candidate.
	candidates := hosts
	healthy := make([]*host, 0, len(hosts))
	for _, h := range hosts {
		if h.healthy {
			healthy = append(healthy, h)
		}
	}
	if len(healthy)*100/len(hosts) >= panicThreshold {
		candidates = healthy
	}
	switch c.lbPolicy {
	case lbRandom:
		return weightedRandom(candidates)
	case lbLeastRequest:
		// Least request with equal weights: power of two choices
		// (LeastRequestLoadBalancer, choice_count default 2).
		a := candidates[rand.IntN(len(candidates))]
		b := candidates[rand.IntN(len(candidates))]
		if b.active.Load() < a.active.Load() {
			return b
		}
		return a
	default:
		return hs.roundRobin(candidates)
	}
}

// roundRobin is weighted round robin (smooth weighting), which with equal weights is
// plain round robin like Envoy's RoundRobinLoadBalancer.
func (hs *hostSet) roundRobin(hosts []*host) *host {
	hs.rrMu.Lock()
	defer hs.rrMu.Unlock()
	total := 0
	var best *host
	for _, h := range hosts {
		hs.rrCurrent[h] += h.weight
		total += h.weight
		if best == nil || hs.rrCurrent[h] > hs.rrCurrent[best] {
			best = h
		}
	}
	hs.rrCurrent[best] -= total
	return best
}

// weightedRandom imitates RandomLoadBalancer with endpoint weights.
func weightedRandom(hosts []*host) *host {
	total := 0
	for _, h := range hosts {
		total += h.weight
	}
	r := rand.IntN(total)
	for _, h := range hosts {
		if r < h.weight {
			return h
		}
		r -= h.weight
	}
	return hosts[len(hosts)-1]
}
