package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

// cancelledRouter compiles a one-deployment configuration with allowedFails 0 and returns a
// router over st, the deployment and a context that is already cancelled: the ext_proc
// attempt role records an attempt's end exactly when its stream is cancelled.
func cancelledRouter(t *testing.T, st routing.Store) (*routing.Router, *config.Deployment, context.Context) {
	t.Helper()
	cfg := &configv1.Config{RouterSettings: &configv1.RouterSettings{AllowedFails: new(uint32)},
		Deployments: []*configv1.Deployment{rdep("d", "m", 1, "")}}
	snap, err := config.Compile(1, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := newClock()
	r := routing.New(config.NewLive(snap), st, routing.Options{Clock: clock, Rand: routing.SystemRand{}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return r, snap.Deployments["d"], ctx
}

// recordCancelled starts and fails one attempt under a cancelled context and checks, on
// another replica, that Redis saw both: the in-flight entry is gone and the circuit open.
func recordCancelled(t *testing.T, st routing.Store, other *redisstore.Store) {
	t.Helper()
	r, d, ctx := cancelledRouter(t, st)
	now := newClock().Now() // the time of cancelledRouter's clock
	req := &routing.Request{ID: "gone", Model: "m", Operation: config.OpText, Start: now}
	if err := r.StartAttempt(ctx, d, "gone/0", now.Add(time.Minute), store.ReservedTokens{}); err != nil {
		t.Fatalf("StartAttempt under a cancelled context: %v", err)
	}
	if got := readOne(t, other, "d", d.Domain, now).Metrics.InFlight; got != 1 {
		t.Fatalf("Redis counts %d in flight after the start, want 1", got)
	}
	if _, err := r.FinishAttempt(ctx, req, d, "gone/0", routing.Result{Classification: transient, Started: now}); err != nil {
		t.Fatalf("FinishAttempt under a cancelled context: %v", err)
	}
	st2 := readOne(t, other, "d", d.Domain, now)
	if st2.Metrics.InFlight != 0 || !st2.Circuit.Open || st2.Metrics.Failures != 1 {
		t.Fatalf("Redis after the cancelled attempt: in flight %d, circuit %+v, failures %d; want 0, open, 1",
			st2.Metrics.InFlight, st2.Circuit, st2.Metrics.Failures)
	}
}

func TestRouterRecordsUnderCancelledContext(t *testing.T) {
	rs := replicas(t, standaloneTarget(t), 2)
	recordCancelled(t, rs[0], rs[1])
}

// TestResilientRecordsCancelledAttemptInRedis: through the degradation wrapper the outcome
// must reach Redis (not only this replica's memory), and a client's cancel is no Redis error.
func TestResilientRecordsCancelledAttemptInRedis(t *testing.T) {
	rs := replicas(t, standaloneTarget(t), 2)
	reg := prometheus.NewRegistry()
	res, err := redisstore.NewResilient(rs[0], redisstore.ResilientConfig{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Close() })
	recordCancelled(t, res, rs[1])
	if st := res.Status(); st.Degraded {
		t.Fatalf("wrapper degraded by a cancelled caller: %s", st.LastError)
	}
	if n := gatherCounter(reg, "switchyard_store_redis_errors_total", "", ""); n != 0 {
		t.Fatalf("switchyard_store_redis_errors_total = %v after a client's cancel, want 0", n)
	}
	if n := sumCounter(reg, "switchyard_store_local_operations_total"); n != 0 {
		t.Fatalf("switchyard_store_local_operations_total = %v, want 0 (everything reached Redis)", n)
	}
}

// TestResilientCancelIsNotARedisError: a read whose caller already gave up fails, but says
// nothing about Redis: no error is counted and the wrapper stays on Redis.
func TestResilientCancelIsNotARedisError(t *testing.T) {
	addr, prefix := shared(t)
	reg := prometheus.NewRegistry()
	res, err := redisstore.NewResilient(newStore(t, addr, prefix), redisstore.ResilientConfig{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := make([]store.DeploymentState, 1)
	_ = res.ReadStates(ctx, t0, []store.DeploymentRef{{ID: "d", Domain: store.DomainOf("d", "")}}, out)
	if n := gatherCounter(reg, "switchyard_store_redis_errors_total", "", ""); n != 0 {
		t.Fatalf("switchyard_store_redis_errors_total = %v after a cancelled read, want 0", n)
	}
	if st := res.Status(); st.Degraded {
		t.Fatalf("a cancelled read degraded the wrapper: %s", st.LastError)
	}
}
