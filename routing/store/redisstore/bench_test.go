package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// The cost of one routing decision's store read against a bare round trip, on the same
// server and client settings. Run both together:
//
//	go test -run '^$' -bench 'Ping|ReadStates8' -benchmem ./routing/store/redisstore/
//
// A benchmark of a whole routing decision through the router belongs with the router
// (routing/), once it exists; it should reuse this package's store.

// BenchmarkPing is one bare PING round trip: the floor every store call pays.
func BenchmarkPing(b *testing.B) {
	addr, prefix := shared(b)
	s := newStore(b, addr, prefix)
	b.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	rdb := s.Client()
	b.ReportAllocs()
	for b.Loop() {
		if err := rdb.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadStates8 reads 8 candidates (circuits, in-flight, metrics) and their failure
// domains in one pipeline, as one routing decision over a group of 8 does.
func BenchmarkReadStates8(b *testing.B) {
	addr, prefix := shared(b)
	s := newStore(b, addr, prefix)
	b.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	now := time.Now()
	refs := make([]store.DeploymentRef, 8)
	for i := range refs {
		id := fmt.Sprint("d", i)
		refs[i] = store.DeploymentRef{ID: id, Domain: store.DomainOf(id, fmt.Sprint("acct", i%2))}
		// Realistic state: attempts in flight, a success (EWMAs, health) and a failure.
		for j := range 3 {
			if err := s.StartAttempt(ctx, store.AttemptStart{DeploymentID: id, AttemptID: fmt.Sprint(id, j), Now: now, Expires: now.Add(time.Hour)}); err != nil {
				b.Fatal(err)
			}
		}
		for _, e := range []store.Effect{store.EffectSuccess, store.EffectTransient} {
			if _, err := s.FinishAttempt(ctx, store.AttemptFinish{DeploymentID: id, Domain: refs[i].Domain, AttemptID: id + "0",
				RequestID: fmt.Sprint(id, e), Now: now, Effect: e, Settings: defaults(), Latency: time.Second, CompletionTokens: 10, TotalTokens: 20}); err != nil {
				b.Fatal(err)
			}
		}
	}
	out := make([]store.DeploymentState, len(refs))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.ReadStates(ctx, now, refs, out); err != nil {
			b.Fatal(err)
		}
	}
	if out[7].Metrics.InFlight != 2 || !out[7].Metrics.HasLatency {
		b.Fatalf("unexpected state read: %+v", out[7])
	}
}

// BenchmarkFinishAttempt is the write of every attempt's end (one script, one round trip).
func BenchmarkFinishAttempt(b *testing.B) {
	addr, prefix := shared(b)
	s := newStore(b, addr, prefix)
	b.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	now := time.Now()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if _, err := s.FinishAttempt(ctx, store.AttemptFinish{DeploymentID: "d", Domain: "acct", AttemptID: fmt.Sprint(i),
			RequestID: fmt.Sprint(i), Now: now, Effect: store.EffectSuccess, Settings: defaults(), Latency: time.Second, CompletionTokens: 10}); err != nil {
			b.Fatal(err)
		}
	}
}
