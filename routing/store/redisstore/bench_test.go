package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

// The cost of a routing decision against a bare round trip to the same server with the same
// client. This machine is noisy (a PING alone swings between ~15 µs and ~120 µs from run to
// run, with CPU frequency and neighbours), so the figures that matter are the paired ones:
// *VsPing benchmarks time one PING and one operation back to back in every iteration and
// report ping-ns/op, <op>-ns/op and ratio = Σ op / Σ ping, which cancels drift. Run:
//
//	go test -run '^$' -bench 'VsPing' -benchmem -count 5 ./routing/store/redisstore/
//
// docs/performance.md ("Redis") records the figures.

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

// BenchmarkReadStates8 reads 8 candidates (circuits, in-flight, metrics) and their two failure
// domains, as one routing decision over a group of 8 does.
func BenchmarkReadStates8(b *testing.B) {
	s, refs, now := readBench(b)
	ctx := context.Background()
	out := make([]store.DeploymentState, len(refs))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.ReadStates(ctx, now, refs, out); err != nil {
			b.Fatal(err)
		}
	}
	checkSeeded(b, out)
}

// BenchmarkReadStates8VsPing is BenchmarkReadStates8 paired with a PING in every iteration.
func BenchmarkReadStates8VsPing(b *testing.B) {
	s, refs, now := readBench(b)
	out := make([]store.DeploymentState, len(refs))
	pairedWithPing(b, s.Client(), "read", func(ctx context.Context) error {
		return s.ReadStates(ctx, now, refs, out)
	})
	checkSeeded(b, out)
}

// BenchmarkDecide8VsPing is one whole routing decision through the router (plan, one
// ReadStates, eligibility, strategy) for a group of 8 deployments in two failure domains
// with live shared state, paired with a PING in every iteration. "resilient" routes through
// the store a replica deploys (the Resilient wrapper, Redis up); "redis" through the bare
// Redis store.
func BenchmarkDecide8VsPing(b *testing.B) {
	for _, wrapped := range []bool{true, false} {
		name := "redis"
		if wrapped {
			name = "resilient"
		}
		b.Run(name, func(b *testing.B) {
			addr, prefix := shared(b)
			remote := newStore(b, addr, prefix)
			var st routing.Store = remote
			if wrapped {
				r, err := redisstore.NewResilient(remote, redisstore.ResilientConfig{Registerer: prometheus.NewRegistry()})
				if err != nil {
					b.Fatal(err)
				}
				st = r
				b.Cleanup(func() { _ = r.Close() })
			} else {
				b.Cleanup(func() { _ = remote.Close() })
			}
			snap := benchConfig(b, 8)
			now := time.Now()
			seed(b, remote, snap.Groups["m"].Refs, now)
			router := routing.New(config.NewLive(snap), st, routing.Options{})
			req := &routing.Request{ID: "bench", Model: "m", Operation: config.OpText, Start: now}
			pairedWithPing(b, remote.Client(), "decide", func(ctx context.Context) error {
				if d := router.Decide(ctx, req, nil); d.Action != routing.ActionAttempt || d.Degraded {
					b.Fatalf("decision: %+v", d)
				}
				return nil
			})
			if r, ok := st.(*redisstore.Resilient); ok && r.Status().Degraded {
				b.Fatalf("wrapper degraded during the benchmark: %s", r.Status().LastError)
			}
		})
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
		id := strconv.Itoa(i)
		if _, err := s.FinishAttempt(ctx, store.AttemptFinish{DeploymentID: "d", Domain: "acct", AttemptID: id,
			RequestID: id, Now: now, Effect: store.EffectSuccess, Settings: defaults(), Latency: time.Second, CompletionTokens: 10}); err != nil {
			b.Fatal(err)
		}
	}
}

// pairedWithPing times a PING and op back to back in every iteration, alternating which
// goes first so neither always runs on a CPU the other just woke, and reports the mean of
// each and their ratio. ns/op is the pair's total.
func pairedWithPing(b *testing.B, rdb redis.UniversalClient, name string, op func(context.Context) error) {
	b.Helper()
	ctx := context.Background()
	var ping, work time.Duration
	first := false
	b.ReportAllocs()
	for b.Loop() {
		first = !first
		t0 := time.Now()
		if first {
			if err := op(ctx); err != nil {
				b.Fatal(err)
			}
		} else if err := rdb.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if first {
			if err := rdb.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		} else if err := op(ctx); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if first {
			work += t1.Sub(t0)
			ping += t2.Sub(t1)
		} else {
			ping += t1.Sub(t0)
			work += t2.Sub(t1)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(ping)/n, "ping-ns/op")
	b.ReportMetric(float64(work)/n, name+"-ns/op")
	b.ReportMetric(float64(work)/float64(ping), "ratio")
}

// readBench opens a store with 8 seeded deployments in two failure domains.
func readBench(b *testing.B) (*redisstore.Store, []store.DeploymentRef, time.Time) {
	b.Helper()
	addr, prefix := shared(b)
	s := newStore(b, addr, prefix)
	b.Cleanup(func() { _ = s.Close() })
	snap := benchConfig(b, 8)
	now := time.Now()
	refs := snap.Groups["m"].Refs
	seed(b, s, refs, now)
	return s, refs, now
}

// benchConfig is a compiled configuration with one group "m" of n deployments spread over
// two failure domains, routed least-busy (a strategy that ranks on the in-flight counts).
func benchConfig(b *testing.B, n int) *config.Snapshot {
	b.Helper()
	cfg := &configv1.Config{RouterSettings: &configv1.RouterSettings{RoutingStrategy: proto.String("least-busy")}}
	for i := range n {
		cfg.Deployments = append(cfg.Deployments, &configv1.Deployment{
			Id: "d" + strconv.Itoa(i), PublicModel: "m", Provider: "openai", BaseUrl: "https://api.example.com",
			ProviderModel: "m-upstream", Weight: proto.Uint32(1), FailureDomain: "acct" + strconv.Itoa(i%2),
		})
	}
	v, err := config.NewValidator()
	if err != nil {
		b.Fatal(err)
	}
	if err := v.Config(cfg); err != nil {
		b.Fatal(err)
	}
	snap, err := config.Compile(1, cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	return snap
}

// seed gives every deployment realistic shared state: 1–4 attempts in flight (the last one
// expiring soonest), a success (EWMAs, health, TPM) and a transient failure (health, the
// failure window).
func seed(b *testing.B, s store.Store, refs []store.DeploymentRef, now time.Time) {
	b.Helper()
	ctx := context.Background()
	for i, ref := range refs {
		for j := range 1 + i%4 {
			if err := s.StartAttempt(ctx, store.AttemptStart{DeploymentID: ref.ID, AttemptID: ref.ID + "-busy-" + strconv.Itoa(j),
				Now: now, Expires: now.Add(time.Hour - time.Duration(j)*time.Minute)}); err != nil {
				b.Fatal(err)
			}
		}
		for k, e := range []store.Effect{store.EffectSuccess, store.EffectTransient} {
			if _, err := s.FinishAttempt(ctx, store.AttemptFinish{DeploymentID: ref.ID, Domain: ref.Domain, AttemptID: "done",
				RequestID: ref.ID + "-r" + strconv.Itoa(k), Now: now, Effect: e, Settings: defaults(),
				Latency: time.Duration(800+i) * time.Millisecond, CompletionTokens: int64(100 + i), TotalTokens: int64(300 + i)}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func checkSeeded(b *testing.B, out []store.DeploymentState) {
	b.Helper()
	if m := out[7].Metrics; m.InFlight != 4 || !m.HasLatency || !m.HasThroughput || m.Successes != 1 || m.Failures != 1 {
		b.Fatalf("unexpected state read: %+v", out[7])
	}
}
