package routing_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// BenchmarkDecide measures one routing decision (a fresh request's first attempt) per
// strategy for groups of 2, 8 and 32 deployments with the memory store. The store holds live
// metrics for every deployment so the metric strategies rank instead of falling back.
func BenchmarkDecide(b *testing.B) {
	for _, s := range config.Strategies() {
		for _, n := range []int{2, 8, 32} {
			b.Run(fmt.Sprintf("%s/%d", s, n), func(b *testing.B) {
				deps := make([]*configv1.Deployment, n)
				for i := range deps {
					deps[i] = dep(fmt.Sprintf("d%02d", i), "m", weight(uint32(1+i%3)), price(float64(1+i), 2))
				}
				e := newEnv(b, cfgOf(settings(strategy(s.String())), deps...))
				for i := range deps {
					id := deps[i].GetId()
					e.busy(id, i%4)
					e.complete(id, time.Duration(100+i)*time.Millisecond, int64(10+i), int64(20+i))
				}
				req := &routing.Request{ID: "bench", Model: "m", Operation: config.OpText, Start: e.clock.Now()}
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					d := e.router.Decide(ctx, req, nil)
					if d.Action != routing.ActionAttempt {
						b.Fatal("no attempt")
					}
				}
			})
		}
	}
}

// BenchmarkReadStatesBaseline is the same run's baseline for BenchmarkDecide: the memory
// store's read of the candidates' state alone, which every decision pays. The ratio
// Decide/ReadStates is the router's own cost, and holds across noisy machines.
func BenchmarkReadStatesBaseline(b *testing.B) {
	for _, n := range []int{2, 8, 32} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			deps := make([]*configv1.Deployment, n)
			for i := range deps {
				deps[i] = dep(fmt.Sprintf("d%02d", i), "m")
			}
			e := newEnv(b, cfgOf(settings(), deps...))
			for i := range deps {
				e.busy(deps[i].GetId(), i%4)
				e.complete(deps[i].GetId(), time.Second, 10, 20)
			}
			g := e.live.Load().Groups["m"]
			out := make([]store.DeploymentState, n)
			ctx := context.Background()
			now := e.clock.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := e.store.ReadStates(ctx, now, g.Refs, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
