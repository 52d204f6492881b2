package routing

import (
	"math"
	"slices"
	"time"

	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// candidate is one deployment considered by a decision, with its live state.
type candidate struct {
	dep   *config.Deployment
	state store.DeploymentState
	hop   int
	// block says why it cannot be used now (or that it needs the probe).
	block blocker
	// until is when a blocked candidate may be used again (zero when unknown or not blocked).
	untilAvailable int64 // unix nanoseconds, to keep candidate small and comparable
	// window is what an attempt on it may use: the time left before the request's deadline,
	// or before the deployment's own lower totalMs (behaviour §6.3).
	window   time.Duration
	tried    bool
	reusable bool
}

// Pick says how a decision's deployment was chosen, for logs and the unified_routing object
// (behaviour §10.1). Decision.Probe and Decision.AllOpenTry add to it.
type Pick uint8

const (
	// PickNone: no deployment was chosen (a stop).
	PickNone Pick = iota
	// PickSingle: the group has one deployment; selection never ran (behaviour §2.1).
	PickSingle
	// PickStrategy: the routing strategy chose.
	PickStrategy
	// PickWeighted: a metric strategy had nothing to compare and fell back to the weighted
	// draw (behaviour §2.2, §2.4).
	PickWeighted
)

func (p Pick) String() string {
	switch p {
	case PickSingle:
		return "single"
	case PickStrategy:
		return "strategy"
	case PickWeighted:
		return "weighted_fallback"
	default:
		return "none"
	}
}

// drawsByWeight reports whether s draws by weight, so that weight 0 takes no traffic at all:
// simple-shuffle never draws it and health-aware multiplies it away (behaviour §2). The metric
// strategies ignore weight and only break ties with it.
func drawsByWeight(s config.Strategy) bool {
	return s == config.StrategySimpleShuffle || s == config.StrategyHealth
}

// pick chooses one of s.cands[s.idx[...]] with the strategy and returns its position in
// s.idx (behaviour §2). s.idx must not be empty. It allocates nothing once s.vals has grown.
func pick(st config.Strategy, s *scratch, r Rand) (int, Pick) {
	cs, idx := s.cands, s.idx
	if len(idx) == 1 {
		return 0, PickStrategy
	}
	switch st {
	case config.StrategyLeastBusy:
		return lowest(s, r, func(c *candidate) (float64, bool) { return float64(c.state.Metrics.InFlight), true })
	case config.StrategyUsageRPM:
		return lowest(s, r, func(c *candidate) (float64, bool) { return float64(c.state.Metrics.RPM), true })
	case config.StrategyUsageTPM:
		return lowest(s, r, func(c *candidate) (float64, bool) { return float64(c.state.Metrics.TPM), true })
	case config.StrategyLatency:
		return lowest(s, r, func(c *candidate) (float64, bool) {
			return c.state.Metrics.LatencyEWMA, c.state.Metrics.HasLatency
		})
	case config.StrategyThroughput:
		return lowest(s, r, func(c *candidate) (float64, bool) {
			return -c.state.Metrics.ThroughputEWMA, c.state.Metrics.HasThroughput
		})
	case config.StrategyPrice:
		return cheapest(s, r)
	case config.StrategyHealth:
		return healthiest(s, r)
	default:
		return weighted(cs, idx, r, nil), PickStrategy
	}
}

// lowest picks the lowest score. A candidate without a usable value (a deployment with no
// completed request yet) ranks at the neutral point, the median of the values known among
// the candidates: it neither wins every decision (a deployment that never reports usage
// would) nor starves. When no candidate has a value at all every one ties and the pick is
// the weighted draw of behaviour §2.2. Ties are broken by a weighted draw among the tied.
func lowest(s *scratch, r Rand, score func(*candidate) (float64, bool)) (int, Pick) {
	cs, idx := s.cands, s.idx
	s.scores, s.vals = s.scores[:0], s.vals[:0]
	for _, i := range idx {
		v, ok := score(&cs[i])
		if !ok {
			v = math.NaN()
		} else {
			s.vals = append(s.vals, v)
		}
		s.scores = append(s.scores, v)
	}
	if len(s.vals) == 0 {
		return weighted(cs, idx, r, nil), PickWeighted
	}
	neutral := median(s.vals)
	best := math.Inf(1)
	for pos, v := range s.scores {
		if math.IsNaN(v) {
			v = neutral
			s.scores[pos] = v
		}
		best = min(best, v)
	}
	scores := s.scores
	return weighted(cs, idx, r, func(pos int) bool { return scores[pos] == best }), PickStrategy
}

// median sorts vs in place and returns its median (the mean of the middle two for an even
// count). vs must not be empty.
func median(vs []float64) float64 {
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// cheapest implements price-based (behaviour §2.4): it compares only when every candidate bills on
// the same known basis; otherwise it falls back to the weighted draw rather than compare
// numbers that mean different things.
func cheapest(s *scratch, r Rand) (int, Pick) {
	cs, idx := s.cands, s.idx
	basis := cs[idx[0]].dep.Price.Basis
	for _, i := range idx {
		if b := cs[i].dep.Price.Basis; b == config.PriceUnknown || b != basis {
			return weighted(cs, idx, r, nil), PickWeighted
		}
	}
	return lowest(s, r, func(c *candidate) (float64, bool) { return c.dep.Price.Rate, true })
}

// healthiest implements health-aware: highest successRate × weight (behaviour §2), with the
// neutral 0.5 for deployments without data (behaviour §3.5). Weight-0 deployments never reach it
// (drawsByWeight). With no data anywhere it is the weighted draw (behaviour §2.2).
func healthiest(s *scratch, r Rand) (int, Pick) {
	cs, idx := s.cands, s.idx
	measured := false
	for _, i := range idx {
		if cs[i].state.Metrics.HasHealth() {
			measured = true
			break
		}
	}
	if !measured {
		return weighted(cs, idx, r, nil), PickWeighted
	}
	return lowest(s, r, func(c *candidate) (float64, bool) {
		return -c.state.Metrics.HealthScore() * float64(c.dep.Weight), true
	})
}

// weighted draws among the candidates of idx whose position keep accepts (all when keep is
// nil), in proportion to their weights. Weight 0 is never drawn while a positive weight is in the
// draw. Only a metric strategy's tie among weight-0 deployments can leave no positive weight
// (simple-shuffle and health-aware never see weight 0, see drawsByWeight); the tie is then
// broken uniformly, since those strategies ignore weight.
func weighted(cs []candidate, idx []int, r Rand, keep func(pos int) bool) int {
	var total float64
	count := 0
	for pos, i := range idx {
		if keep != nil && !keep(pos) {
			continue
		}
		total += float64(cs[i].dep.Weight)
		count++
	}
	if count == 0 {
		return 0
	}
	if total == 0 {
		n := int(r.Float64() * float64(count))
		for pos := range idx {
			if keep != nil && !keep(pos) {
				continue
			}
			if n == 0 {
				return pos
			}
			n--
		}
	}
	x := r.Float64() * total
	last := 0
	for pos, i := range idx {
		if keep != nil && !keep(pos) {
			continue
		}
		w := float64(cs[i].dep.Weight)
		if w == 0 {
			continue
		}
		last = pos
		if x < w {
			return pos
		}
		x -= w
	}
	return last // rounding left x just above zero
}
