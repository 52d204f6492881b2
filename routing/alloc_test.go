//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation counts are measured
// only without it (make test runs the package both ways).

package routing_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/config"
)

// The decision path allocates nothing, whatever the strategy (8 deployments with metrics,
// half of them with rpm/tpm limits, whose reservation is on the path too).
func TestDecideAllocatesNothing(t *testing.T) {
	for _, s := range config.Strategies() {
		deps := make([]*configv1.Deployment, 8)
		for i := range deps {
			deps[i] = dep(fmt.Sprintf("d%d", i), "m", weight(uint32(1+i%3)), price(float64(1+i), 2))
			if i%2 == 1 {
				rpmLimit(1 << 40)(deps[i])
				tpmLimit(1 << 40)(deps[i])
			}
		}
		e := newEnv(t, cfgOf(settings(strategy(s.String())), deps...))
		for i := range deps {
			if i%2 == 0 { // half of them measured: the cold-start median runs too
				e.complete(deps[i].GetId(), time.Duration(100+i)*time.Millisecond, int64(10+i), int64(20+i))
			}
		}
		req := e.request("m")
		ctx := context.Background()
		e.router.Decide(ctx, req, nil) // warm the pool
		if n := testing.AllocsPerRun(200, func() { e.router.Decide(ctx, req, nil) }); n != 0 {
			t.Errorf("%s: %.1f allocations per decision, want 0", s, n)
		}
	}
}
