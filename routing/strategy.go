package routing

import (
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
	tried          bool
	reusable       bool
}

// pick chooses one of cs[idx[...]] with the strategy and returns its position in idx
// (SPEC §2). idx must not be empty. It allocates nothing.
func pick(s config.Strategy, cs []candidate, idx []int, r Rand) int {
	if len(idx) == 1 {
		return 0
	}
	switch s {
	case config.StrategyLeastBusy:
		return lowest(cs, idx, r, func(c *candidate) (float64, bool) { return float64(c.state.Metrics.InFlight), true })
	case config.StrategyUsageRPM:
		return lowest(cs, idx, r, func(c *candidate) (float64, bool) { return float64(c.state.Metrics.RPM), true })
	case config.StrategyUsageTPM:
		return lowest(cs, idx, r, func(c *candidate) (float64, bool) { return float64(c.state.Metrics.TPM), true })
	case config.StrategyLatency:
		return lowest(cs, idx, r, func(c *candidate) (float64, bool) {
			return c.state.Metrics.LatencyEWMA, c.state.Metrics.HasLatency
		})
	case config.StrategyThroughput:
		return lowest(cs, idx, r, func(c *candidate) (float64, bool) {
			return -c.state.Metrics.ThroughputEWMA, c.state.Metrics.HasThroughput
		})
	case config.StrategyPrice:
		return cheapest(cs, idx, r)
	case config.StrategyHealth:
		return healthiest(cs, idx, r)
	default:
		return weighted(cs, idx, r, nil)
	}
}

// lowest picks the lowest score. A candidate without a usable value (a deployment with no
// completed request yet) ranks first, so new deployments get measured instead of starving;
// when no candidate has a value at all every one ties and the pick is the weighted draw of
// SPEC §2.2. Ties are broken by a weighted draw among the tied.
func lowest(cs []candidate, idx []int, r Rand, score func(*candidate) (float64, bool)) int {
	best, haveBest, anyUnknown := 0.0, false, false
	for _, i := range idx {
		v, ok := score(&cs[i])
		if !ok {
			anyUnknown = true
			continue
		}
		if !haveBest || v < best {
			best, haveBest = v, true
		}
	}
	return weighted(cs, idx, r, func(c *candidate) bool {
		v, ok := score(c)
		if anyUnknown {
			return !ok
		}
		return v == best
	})
}

// cheapest implements price-based (SPEC §2.4): it compares only when every candidate bills on
// the same known basis; otherwise it falls back to the weighted draw rather than compare
// numbers that mean different things.
func cheapest(cs []candidate, idx []int, r Rand) int {
	basis := cs[idx[0]].dep.Price.Basis
	for _, i := range idx {
		if b := cs[i].dep.Price.Basis; b == config.PriceUnknown || b != basis {
			return weighted(cs, idx, r, nil)
		}
	}
	return lowest(cs, idx, r, func(c *candidate) (float64, bool) { return c.dep.Price.Rate, true })
}

// healthiest implements health-aware: highest successRate × weight (SPEC §2), with the
// neutral 0.5 for deployments without data (SPEC §3.5). Weight 0 scores 0 and is passed over
// while anything scores higher. With no data anywhere it is the weighted draw (SPEC §2.2).
func healthiest(cs []candidate, idx []int, r Rand) int {
	measured := false
	for _, i := range idx {
		if cs[i].state.Metrics.HasHealth() {
			measured = true
			break
		}
	}
	if !measured {
		return weighted(cs, idx, r, nil)
	}
	return lowest(cs, idx, r, func(c *candidate) (float64, bool) {
		return -c.state.Metrics.HealthScore() * float64(c.dep.Weight), true
	})
}

// weighted draws among the candidates of idx accepted by keep (all when keep is nil), in
// proportion to their weights. Weight 0 is never drawn while a positive weight is in the
// draw; if every weight is 0 the draw is uniform, so a group made only of zero-weight
// (standby) deployments still serves.
func weighted(cs []candidate, idx []int, r Rand, keep func(*candidate) bool) int {
	var total float64
	count := 0
	for _, i := range idx {
		if keep != nil && !keep(&cs[i]) {
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
		for pos, i := range idx {
			if keep != nil && !keep(&cs[i]) {
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
		if keep != nil && !keep(&cs[i]) {
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
