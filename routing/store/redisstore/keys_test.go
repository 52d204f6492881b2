package redisstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

// TestScriptsSurviveScriptFlush: after SCRIPT FLUSH (a restarted server, a failover to a
// replica that never saw the scripts) every script still runs, through the single-call
// path (EVALSHA → EVAL) and the pipelined one (FinishAttempt with a throttle: two scripts).
func TestScriptsSurviveScriptFlush(t *testing.T) {
	addr, prefix := shared(t)
	s := newStore(t, addr, prefix)
	t.Cleanup(func() { _ = s.Close() })
	admin := newClient(addr)
	t.Cleanup(func() { _ = admin.Close() })
	flush := func() {
		t.Helper()
		if err := admin.ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	cs := defaults()
	cs.AllowedFails = 0

	flush()
	if err := s.StartAttempt(t.Context(), store.AttemptStart{DeploymentID: "d", AttemptID: "a", Now: t0, Expires: t0.Add(time.Minute)}); err != nil {
		t.Fatalf("StartAttempt after SCRIPT FLUSH: %v", err)
	}
	flush()
	if tr := mustFinish(t, s, store.AttemptFinish{DeploymentID: "d", AttemptID: "a", RequestID: "r", Now: t0, Effect: store.EffectTransient, Settings: cs}); !tr.Opened {
		t.Fatalf("FinishAttempt after SCRIPT FLUSH: %+v", tr)
	}
	flush()
	if ok, err := s.AcquireProbe(t.Context(), "d", "p", t0.Add(cs.Cooldown), cs.HalfOpenProbe); err != nil || !ok {
		t.Fatalf("AcquireProbe after SCRIPT FLUSH: %v %v", ok, err)
	}
	flush()
	tr := mustFinish(t, s, store.AttemptFinish{DeploymentID: "d", Domain: "acct", RequestID: "t", Now: t0, Effect: store.EffectThrottle, Settings: cs, RetryAfter: 9 * time.Second})
	if !tr.CapacityOpened || tr.Capacity.Until.Sub(t0) != 9*time.Second {
		t.Fatalf("pipelined FinishAttempt after SCRIPT FLUSH: %+v", tr)
	}
	flush()
	if _, err := s.ReplaceConfig(t.Context(), testConfig("d")); err != nil {
		t.Fatalf("config write after SCRIPT FLUSH: %v", err)
	}
	if st := readOne(t, s, "d", "", t0); st.Metrics.InFlight != 0 || st.Circuit.ProbeOwner != "p" {
		t.Fatalf("state after the flushes: %+v", st)
	}
}

// TestEveryKeyHasATTL drives every kind of write, then checks each key under the prefix:
// routing state must carry a TTL (garbage collection), bounded by the longest documented
// horizon; only the configuration (the {cfg} keys) is durable by design (docs/redis.md).
// The caller's clock is years away from the server's, so a TTL computed from an absolute
// time instead of a relative duration would show up here as missing or absurd.
func TestEveryKeyHasATTL(t *testing.T) {
	addr, prefix := shared(t)
	s := newStore(t, addr, prefix)
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	for _, now := range []time.Time{t0, time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)} {
		cs := defaults()
		cs.AllowedFails = 0
		for _, id := range []string{"d1", "d2", "d3"} {
			if err := s.StartAttempt(ctx, store.AttemptStart{DeploymentID: id, AttemptID: "open-" + id, Now: now, Expires: now.Add(10 * time.Minute)}); err != nil {
				t.Fatal(err)
			}
		}
		mustFinish(t, s, store.AttemptFinish{DeploymentID: "d1", RequestID: "ok", Now: now, Effect: store.EffectSuccess, Settings: cs, Latency: time.Second, CompletionTokens: 5, TotalTokens: 9})
		mustFinish(t, s, store.AttemptFinish{DeploymentID: "d2", RequestID: "bad", Now: now, Effect: store.EffectTransient, Settings: cs, DedupeTTL: 30 * time.Second})
		if _, err := s.AcquireProbe(ctx, "d2", "probe", now.Add(cs.Cooldown), cs.HalfOpenProbe); err != nil {
			t.Fatal(err)
		}
		mustFinish(t, s, store.AttemptFinish{DeploymentID: "d3", RequestID: "cfg", Now: now, Effect: store.EffectConfiguration, Settings: cs})
		mustFinish(t, s, store.AttemptFinish{DeploymentID: "d1", Domain: "acct", RequestID: "429", Now: now, Effect: store.EffectThrottle, Settings: cs, RetryAfter: time.Minute})
		mustFinish(t, s, store.AttemptFinish{DeploymentID: "d2", Domain: "acct2", RequestID: "quota", Now: now, Effect: store.EffectQuota, Settings: cs})
	}
	if _, err := s.ReplaceConfig(ctx, &configv1.Config{Deployments: []*configv1.Deployment{testDeployment("d1")},
		RouterSettings: &configv1.RouterSettings{}, FallbackChains: []*configv1.FallbackChain{{PublicModel: "m", Reason: "general", Targets: []string{"n"}}},
		ModelPolicies: []*configv1.ModelPolicy{{PublicModel: "m"}}}); err != nil {
		t.Fatal(err)
	}

	rdb := s.Client()
	seen := map[string]bool{}
	iter := rdb.Scan(ctx, 0, prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		ttl, err := rdb.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		kind := key[strings.LastIndex(key, "}")+2:]
		if i := strings.Index(kind, ":"); i >= 0 {
			kind = kind[:i] // counted:<request>
		}
		durable := strings.Contains(key, "{cfg}")
		if durable {
			kind = "cfg:" + kind
		}
		seen[kind] = true
		switch {
		case durable && ttl != -1:
			t.Errorf("config key %s has TTL %v; configuration is durable", key, ttl)
		case !durable && ttl <= 0:
			t.Errorf("routing key %s has no TTL (%v)", key, ttl)
		case !durable && ttl > 25*time.Hour:
			t.Errorf("routing key %s has TTL %v, longer than any documented horizon", key, ttl)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"state", "inflight", "counted", "cap",
		"cfg:version", "cfg:settings", "cfg:deployments", "cfg:secrets", "cfg:chains", "cfg:policies"} {
		if !seen[kind] {
			t.Errorf("the workload wrote no %q key; the check does not cover it (seen %v)", kind, seen)
		}
	}
}

// TestInFlightKeyVanishesWithItsLastEntry: an in-flight set that empties is deleted at once
// (nothing waits for a TTL), and the TTL of a live one covers its latest entry.
func TestInFlightKeyVanishesWithItsLastEntry(t *testing.T) {
	addr, prefix := shared(t)
	s := newStore(t, addr, prefix)
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	rdb := s.Client()
	key := s.InflightKey("d")
	if err := s.StartAttempt(ctx, store.AttemptStart{DeploymentID: "d", AttemptID: "short", Now: t0, Expires: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := s.StartAttempt(ctx, store.AttemptStart{DeploymentID: "d", AttemptID: "long", Now: t0, Expires: t0.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// A later start with an earlier expiry must not shorten the key's life below "long".
	if err := s.StartAttempt(ctx, store.AttemptStart{DeploymentID: "d", AttemptID: "short2", Now: t0, Expires: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl < 2*time.Hour {
		t.Fatalf("in-flight TTL %v does not cover the 2h entry", ttl)
	}
	for _, a := range []string{"short", "long", "short2"} {
		mustFinish(t, s, store.AttemptFinish{DeploymentID: "d", AttemptID: a, RequestID: a, Now: t0, Effect: store.EffectNeutral, Settings: defaults()})
	}
	if n := rdb.Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("empty in-flight set still exists")
	}
}

// TestNewRejectsBracesInPrefix: a brace in the prefix would move every hash tag.
func TestNewRejectsBracesInPrefix(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	if _, err := redisstore.New(c, redisstore.WithPrefix("a{b}:")); err == nil {
		t.Fatal("prefix with braces accepted")
	}
}

// TestProbeOwnerMayContainSeparator: the probe owner is free text and the last field of the
// state record, so a request id containing the record's separator reads back intact.
func TestProbeOwnerMayContainSeparator(t *testing.T) {
	addr, prefix := shared(t)
	s := newStore(t, addr, prefix)
	t.Cleanup(func() { _ = s.Close() })
	cs := defaults()
	cs.AllowedFails = 0
	mustFinish(t, s, store.AttemptFinish{DeploymentID: "d", RequestID: "opener", Now: t0, Effect: store.EffectTransient, Settings: cs})
	const owner = "req|with|pipes||"
	half := t0.Add(cs.Cooldown)
	if ok, err := s.AcquireProbe(t.Context(), "d", owner, half, cs.HalfOpenProbe); err != nil || !ok {
		t.Fatalf("AcquireProbe: %v %v", ok, err)
	}
	c := readOne(t, s, "d", "", half).Circuit
	if c.ProbeOwner != owner || c.State(half) != store.StateProbing || !c.ProbeUntil.Equal(half.Add(cs.HalfOpenProbe)) {
		t.Fatalf("circuit read back: %+v", c)
	}
	if tr := mustFinish(t, s, store.AttemptFinish{DeploymentID: "d", RequestID: owner, Now: half, Effect: store.EffectSuccess, Settings: cs, Latency: time.Second}); !tr.Closed {
		t.Fatalf("the owner's success did not close the circuit: %+v", tr)
	}
}
