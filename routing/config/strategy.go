package config

// Strategy is the routing strategy (behaviour §2), one for the whole gateway.
type Strategy uint8

const (
	StrategySimpleShuffle Strategy = iota
	StrategyLeastBusy
	StrategyUsageRPM
	StrategyUsageTPM
	StrategyLatency
	StrategyThroughput
	StrategyPrice
	StrategyHealth
)

var strategyNames = [...]string{
	StrategySimpleShuffle: "simple-shuffle",
	StrategyLeastBusy:     "least-busy",
	StrategyUsageRPM:      "usage-based-rpm",
	StrategyUsageTPM:      "usage-based-tpm",
	StrategyLatency:       "latency-based",
	StrategyThroughput:    "throughput-based",
	StrategyPrice:         "price-based",
	StrategyHealth:        "health-aware",
}

func (s Strategy) String() string {
	if int(s) < len(strategyNames) {
		return strategyNames[s]
	}
	return "unknown"
}

// Strategies lists every strategy.
func Strategies() []Strategy {
	out := make([]Strategy, len(strategyNames))
	for i := range out {
		out[i] = Strategy(i)
	}
	return out
}

// ParseStrategy maps a routingStrategy value to its Strategy.
func ParseStrategy(s string) (Strategy, bool) {
	for i, n := range strategyNames {
		if n == s {
			return Strategy(i), true
		}
	}
	return 0, false
}
