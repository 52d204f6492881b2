package routing_test

import (
	"math"
	"testing"
	"time"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
)

// A deployment that never reports usage ranks at the median of the known values, so it no
// longer wins every throughput-based decision.
func TestColdStartRanksAtTheMedian(t *testing.T) {
	onEachStore(t, func(t *testing.T, newEnv func(*configv1.Config, ...func(*routing.Options)) *env) {
		e := newEnv(cfgOf(settings(strategy("throughput-based")), dep("slow", "m"), dep("fast", "m"), dep("silent", "m")))
		e.complete("slow", time.Second, 10, 20) // 10 tokens/s
		e.complete("fast", time.Second, 30, 40) // 30 tokens/s
		if got := e.counts("m", 200); got["fast"] != 200 {
			t.Fatalf("throughput-based with an unmeasured deployment: %v, want every pick on fast (silent ranks at the median, 20 tokens/s)", got)
		}
	})
}

// At the median the unmeasured deployment ties with the measured one of a pair, and the tie
// is broken by the weighted draw (behaviour §2.2).
func TestColdStartTieIsTheWeightedDraw(t *testing.T) {
	onEachStore(t, func(t *testing.T, newEnv func(*configv1.Config, ...func(*routing.Options)) *env) {
		e := newEnv(cfgOf(settings(strategy("latency-based")), dep("known", "m", weight(1)), dep("new", "m", weight(3))))
		e.complete("known", 2*time.Second, 10, 20)
		const n = 4000
		got := e.counts("m", n)
		if share := float64(got["new"]) / n; math.Abs(share-0.75) > 0.04 {
			t.Fatalf("share of the unmeasured deployment = %.3f, want the 0.75 of the weighted draw among the tied", share)
		}
	})
}
