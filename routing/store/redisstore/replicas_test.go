package redisstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
	"github.com/switchyard-gw/switchyard/routing/store/storetest"
)

// Multi-replica behaviour beyond the conformance suite: many gateway replicas, each with its
// own client, racing on one Redis.

const (
	nReplicas = 8
	nCallers  = 64
)

// t0 is far from real time on purpose: the store must compute everything from the `now` it
// is given, never from the server's clock.
var t0 = time.Date(2031, 5, 6, 7, 8, 0, 0, time.UTC)

func defaults() store.CircuitSettings {
	return store.CircuitSettings{
		AllowedFails: 3, Cooldown: 5 * time.Second, FailureWindow: time.Minute,
		MaxCooldown: 300 * time.Second, HalfOpenProbe: 30 * time.Second,
		ConfigurationCooldown: 300 * time.Second, ThrottleCooldown: 5 * time.Second,
	}
}

// replicas opens n stores, each with its own client, onto one fresh prefix.
func replicas(t *testing.T, tg target, n int, opts ...redisstore.Option) []*redisstore.Store {
	t.Helper()
	prefix := sharedOn(t, tg)
	rs := make([]*redisstore.Store, n)
	for i := range rs {
		rs[i] = newStoreOn(t, tg, prefix, opts...)
		t.Cleanup(func() { _ = rs[i].Close() })
	}
	return rs
}

// concurrently runs fn(i) for i in [0,nCallers), all released at once.
func concurrently(fn func(i int)) { storetest.Concurrently(nCallers, fn) }

func mustFinish(t *testing.T, s store.Store, f store.AttemptFinish) store.Transition {
	t.Helper()
	if f.Domain == "" {
		f.Domain = store.DomainOf(f.DeploymentID, "")
	}
	if f.AttemptID == "" {
		f.AttemptID = f.RequestID + "@" + f.DeploymentID
	}
	tr, err := s.FinishAttempt(t.Context(), f)
	if err != nil {
		t.Fatalf("FinishAttempt: %v", err)
	}
	return tr
}

func readOne(t *testing.T, s store.Store, id, domain string, now time.Time) store.DeploymentState {
	t.Helper()
	out := make([]store.DeploymentState, 1)
	if err := s.ReadStates(t.Context(), now, []store.DeploymentRef{{ID: id, Domain: domain}}, out); err != nil {
		t.Fatalf("ReadStates: %v", err)
	}
	return out[0]
}

// TestReplicasHalfOpenExactlyOneProbe: 64 callers on 8 replicas reach a half-open circuit
// at once; one owns the probe. When the owner vanishes and its probe TTL runs out, again
// exactly one of 64 new callers takes over.
func TestReplicasHalfOpenExactlyOneProbe(t *testing.T) {
	onEveryTopology(t, testReplicasHalfOpenExactlyOneProbe)
}

func testReplicasHalfOpenExactlyOneProbe(t *testing.T, tg target) {
	rs := replicas(t, tg, nReplicas)
	cs := defaults()
	cs.AllowedFails = 0
	if tr := mustFinish(t, rs[0], store.AttemptFinish{DeploymentID: "d", RequestID: "opener", Now: t0, Effect: store.EffectTransient, Settings: cs}); !tr.Opened {
		t.Fatalf("circuit did not open: %+v", tr)
	}
	for round, now := range []time.Time{t0.Add(cs.Cooldown), t0.Add(cs.Cooldown + cs.HalfOpenProbe)} {
		var winners atomic.Int32
		var owner atomic.Value
		concurrently(func(i int) {
			req := fmt.Sprintf("r%d-%d", round, i)
			ok, err := rs[i%nReplicas].AcquireProbe(context.Background(), "d", req, now, cs.HalfOpenProbe)
			if err != nil {
				t.Errorf("AcquireProbe: %v", err)
			}
			if ok {
				winners.Add(1)
				owner.Store(req)
			}
		})
		if n := winners.Load(); n != 1 {
			t.Fatalf("round %d: %d of %d callers own the probe, want exactly 1", round, n, nCallers)
		}
		for _, r := range rs {
			if c := readOne(t, r, "d", "", now).Circuit; c.ProbeOwner != owner.Load() || c.State(now) != store.StateProbing {
				t.Fatalf("round %d: a replica sees owner %q state %v, want %q probing", round, c.ProbeOwner, c.State(now), owner.Load())
			}
		}
	}
}

// TestReplicasConcurrentFailuresOpenOnce: 64 distinct requests fail at once on 8 replicas;
// the circuit opens exactly once, exactly allowedFails+1 failures count, and every replica
// reads the same cooldown end.
func TestReplicasConcurrentFailuresOpenOnce(t *testing.T) {
	onEveryTopology(t, testReplicasConcurrentFailuresOpenOnce)
}

func testReplicasConcurrentFailuresOpenOnce(t *testing.T, tg target) {
	rs := replicas(t, tg, nReplicas)
	cs := defaults()
	var opened, counted atomic.Int32
	concurrently(func(i int) {
		tr, err := rs[i%nReplicas].FinishAttempt(context.Background(), store.AttemptFinish{
			DeploymentID: "d", Domain: store.DomainOf("d", ""), AttemptID: fmt.Sprint("a", i),
			RequestID: fmt.Sprint("r", i), Now: t0.Add(time.Duration(i) * time.Millisecond),
			Effect: store.EffectTransient, Settings: cs,
		})
		if err != nil {
			t.Errorf("FinishAttempt: %v", err)
			return
		}
		if tr.Opened {
			opened.Add(1)
		}
		if tr.Counted {
			counted.Add(1)
		}
	})
	if opened.Load() != 1 || counted.Load() != int32(cs.AllowedFails)+1 {
		t.Fatalf("opened %d times with %d counted, want 1 and %d", opened.Load(), counted.Load(), cs.AllowedFails+1)
	}
	want := readOne(t, rs[0], "d", "", t0).Circuit.OpenUntil
	for _, r := range rs[1:] {
		if got := readOne(t, r, "d", "", t0).Circuit.OpenUntil; !got.Equal(want) {
			t.Fatalf("replicas disagree on the cooldown end: %v vs %v", got, want)
		}
	}
}

// TestReplicasLateFailuresCannotMoveReopenTime: once open, failures of requests that were
// in flight elsewhere (64 of them on 8 replicas, during the cooldown and at half-open) count
// nothing and leave the reopen time where it is; only the probe owner's failure reopens.
func TestReplicasLateFailuresCannotMoveReopenTime(t *testing.T) {
	onEveryTopology(t, testReplicasLateFailuresCannotMoveReopenTime)
}

func testReplicasLateFailuresCannotMoveReopenTime(t *testing.T, tg target) {
	rs := replicas(t, tg, nReplicas)
	cs := defaults()
	cs.AllowedFails = 0
	until := mustFinish(t, rs[0], store.AttemptFinish{DeploymentID: "d", RequestID: "first", Now: t0, Effect: store.EffectTransient, Settings: cs}).Circuit.OpenUntil
	late := func(now time.Time) {
		concurrently(func(i int) {
			tr, err := rs[i%nReplicas].FinishAttempt(context.Background(), store.AttemptFinish{
				DeploymentID: "d", Domain: store.DomainOf("d", ""), AttemptID: fmt.Sprint("late", i),
				RequestID: fmt.Sprint("late", i), Now: now, Effect: store.EffectTransient, Settings: cs,
			})
			if err != nil {
				t.Errorf("FinishAttempt: %v", err)
				return
			}
			if tr.Counted || tr.Opened || tr.Reopened {
				t.Errorf("late failure changed the open circuit: %+v", tr)
			}
		})
		if got := readOne(t, rs[nReplicas-1], "d", "", now).Circuit.OpenUntil; !got.Equal(until) {
			t.Fatalf("late failures moved the reopen time from %v to %v", until, got)
		}
	}
	late(t0.Add(time.Second))
	half := until.Add(time.Second)
	if ok, err := rs[3].AcquireProbe(t.Context(), "d", "probe", half, cs.HalfOpenProbe); err != nil || !ok {
		t.Fatalf("probe not acquired at half-open: %v %v", ok, err)
	}
	late(half)
	tr := mustFinish(t, rs[5], store.AttemptFinish{DeploymentID: "d", RequestID: "probe", Now: half, Effect: store.EffectTransient, Settings: cs})
	if !tr.Reopened || tr.Circuit.OpenUntil.Sub(half) != 2*cs.Cooldown {
		t.Fatalf("the probe owner's failure: %+v, want a reopen for %v", tr, 2*cs.Cooldown)
	}
}

// TestReplicasThrottleCoolsFailureDomain: a 429 seen by one replica rate-limits every
// deployment of the failure domain on every other replica; a shorter 429 elsewhere never
// shortens it, and other domains are untouched.
func TestReplicasThrottleCoolsFailureDomain(t *testing.T) {
	onEveryTopology(t, testReplicasThrottleCoolsFailureDomain)
}

func testReplicasThrottleCoolsFailureDomain(t *testing.T, tg target) {
	rs := replicas(t, tg, nReplicas)
	cs := defaults()
	tr := mustFinish(t, rs[0], store.AttemptFinish{DeploymentID: "a1", Domain: "acct", RequestID: "r", Now: t0, Effect: store.EffectThrottle, Settings: cs, RetryAfter: 20 * time.Second})
	if !tr.CapacityOpened || tr.Capacity.Until.Sub(t0) != 20*time.Second {
		t.Fatalf("429 with Retry-After 20s: %+v", tr)
	}
	concurrently(func(i int) {
		_, err := rs[i%nReplicas].FinishAttempt(context.Background(), store.AttemptFinish{
			DeploymentID: fmt.Sprint("a", i%4), Domain: "acct", AttemptID: fmt.Sprint("x", i), RequestID: fmt.Sprint("x", i),
			Now: t0.Add(time.Second), Effect: store.EffectThrottle, Settings: cs,
		})
		if err != nil {
			t.Errorf("FinishAttempt: %v", err)
		}
	})
	now := t0.Add(10 * time.Second)
	for i, r := range rs {
		st := readOne(t, r, fmt.Sprint("b", i), "acct", now)
		if !st.Capacity.Limited(now) || st.Capacity.Until.Sub(t0) != 20*time.Second {
			t.Fatalf("replica %d: domain capacity %+v, want limited until t0+20s", i, st.Capacity)
		}
		if st.Metrics.Failures != 0 || st.Circuit.Failures != 0 {
			t.Fatalf("a throttle counted as a failure: %+v", st)
		}
		if other := readOne(t, r, "c", "other-acct", now); other.Capacity.Limited(now) {
			t.Fatal("another failure domain is rate limited")
		}
	}
}

// awaitVersion waits until ch delivers a version ≥ want.
func awaitVersion(t *testing.T, ch <-chan uint64, want uint64, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				t.Fatal("watch channel closed")
			}
			if v >= want {
				return
			}
		case <-deadline:
			t.Fatalf("version %d not delivered within %v", want, within)
		}
	}
}

// waitSubscribed polls until the config channel has a subscriber.
func waitSubscribed(t *testing.T, s *redisstore.Store) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := numSub(t.Context(), s.Client(), s.ConfigChannel())
		if err == nil && n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no subscriber on %s after 5s (err %v)", s.ConfigChannel(), err)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}

// numSub counts the subscribers of a classic channel. A Cluster node reports only its own
// clients' subscriptions, so on a Cluster every master is asked.
func numSub(ctx context.Context, c redis.UniversalClient, channel string) (int64, error) {
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		n, err := c.PubSubNumSub(ctx, channel).Result()
		return n[channel], err
	}
	var total atomic.Int64
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		n, err := node.PubSubNumSub(ctx, channel).Result()
		total.Add(n[channel])
		return err
	})
	return total.Load(), err
}

// testConfig is a configuration of testDeployment(id) for every id.
func testConfig(ids ...string) *configv1.Config {
	cfg := &configv1.Config{}
	for _, id := range ids {
		cfg.Deployments = append(cfg.Deployments, testDeployment(id))
	}
	return cfg
}

func testDeployment(id string) *configv1.Deployment {
	return &configv1.Deployment{Id: id, PublicModel: "m", Provider: "openai", BaseUrl: "https://example.test",
		ProviderModel: "m", ApiKey: "sk-" + id, Weight: proto.Uint32(1)}
}

// TestConfigReachesReplicaByPubSub: with polling effectively off, a change made on one
// replica reaches the other through pub/sub alone, within a bounded time.
func TestConfigReachesReplicaByPubSub(t *testing.T) {
	onEveryTopology(t, testConfigReachesReplicaByPubSub)
}

func testConfigReachesReplicaByPubSub(t *testing.T, tg target) {
	prefix := sharedOn(t, tg)
	writer := newStoreOn(t, tg, prefix)
	reader := newStoreOn(t, tg, prefix, redisstore.WithConfigPollInterval(time.Hour))
	t.Cleanup(func() { _ = writer.Close(); _ = reader.Close() })

	v1, err := writer.ReplaceConfig(t.Context(), testConfig("d1"))
	if err != nil {
		t.Fatal(err)
	}
	watch := reader.WatchConfig(t.Context())
	awaitVersion(t, watch, v1, 5*time.Second) // the watcher's start-up read
	waitSubscribed(t, reader)

	v2, err := writer.ReplaceConfig(t.Context(), testConfig("d1", "d2"))
	if err != nil {
		t.Fatal(err)
	}
	awaitVersion(t, watch, v2, 5*time.Second)
	if snap, err := reader.LoadConfig(t.Context()); err != nil || snap.Version < v2 || len(snap.Config.GetDeployments()) != 2 {
		t.Fatalf("reader loaded version %d (%v) after the notification of %d", snap.Version, err, v2)
	}
}

// TestConfigReachesReplicaByPollingWhenNotificationLost: the writer's notification is lost
// (not published at all); the reader still sees the change through version polling.
func TestConfigReachesReplicaByPollingWhenNotificationLost(t *testing.T) {
	onEveryTopology(t, testConfigReachesReplicaByPollingWhenNotificationLost)
}

func testConfigReachesReplicaByPollingWhenNotificationLost(t *testing.T, tg target) {
	prefix := sharedOn(t, tg)
	writer := newStoreOn(t, tg, prefix, redisstore.WithoutPublish())
	reader := newStoreOn(t, tg, prefix, redisstore.WithConfigPollInterval(20*time.Millisecond))
	t.Cleanup(func() { _ = writer.Close(); _ = reader.Close() })

	watch := reader.WatchConfig(t.Context())
	waitSubscribed(t, reader)
	v, err := writer.ReplaceConfig(t.Context(), &configv1.Config{RouterSettings: &configv1.RouterSettings{RoutingStrategy: proto.String("least-busy")}})
	if err != nil {
		t.Fatal(err)
	}
	awaitVersion(t, watch, v, 5*time.Second)
}
