package sim

import "sync"

// counters holds the Envoy stats envoysim keeps (only those tests need). Names are
// Envoy's counter names without the per-listener or per-cluster scope, summed over
// every filter instance: e.g. "ext_proc.send_immediate_resp_upstream_ignored".
type counters struct {
	mu sync.Mutex
	m  map[string]uint64
}

func (c *counters) inc(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]uint64{}
	}
	c.m[name]++
}

func (c *counters) get(name string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[name]
}

// Counter returns the value of an Envoy counter kept by envoysim (0 if never
// incremented), e.g. "ext_proc.send_immediate_resp_upstream_ignored".
func (s *Sim) Counter(name string) uint64 { return s.stats.get(name) }
