package routing_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// ctxStore is the memory store behind a context check, the way a networked store behaves: a
// call under a cancelled or expired context is refused. It keeps what the calls were given.
type ctxStore struct {
	store.Store
	deadlines []time.Duration // time left on each recording call's context
}

func (s *ctxStore) StartAttempt(ctx context.Context, a store.AttemptStart) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.Store.StartAttempt(ctx, a)
}

func (s *ctxStore) FinishAttempt(ctx context.Context, f store.AttemptFinish) (store.Transition, error) {
	if err := s.check(ctx); err != nil {
		return store.Transition{}, err
	}
	return s.Store.FinishAttempt(ctx, f)
}

func (s *ctxStore) check(ctx context.Context) error {
	dl, ok := ctx.Deadline()
	if !ok {
		s.deadlines = append(s.deadlines, -1)
	} else {
		s.deadlines = append(s.deadlines, time.Until(dl))
	}
	return ctx.Err()
}

// TestAttemptRecordedAfterCancel: the ext_proc attempt role finishes an attempt exactly when
// its stream is cancelled; the books must still be written, under a context of their own
// that is bounded by RecordTimeout.
func TestAttemptRecordedAfterCancel(t *testing.T) {
	e := newEnv(t, cfgOf(settings(allowedFails(0)), dep("a", "m")))
	st := &ctxStore{Store: e.store}
	r := routing.New(e.live, st, routing.Options{Clock: e.clock, Rand: newRand(1), RecordTimeout: 3 * time.Second})
	req := e.request("m")
	d := e.mustAttempt(req, nil)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.StartAttempt(ctx, d.Deployment, "a1", d.Deadline, d.Reserved); err != nil {
		t.Fatalf("StartAttempt under a cancelled context: %v", err)
	}
	if got := e.state("a").Metrics.InFlight; got != 1 {
		t.Fatalf("in flight = %d after the start, want 1", got)
	}
	tr, err := r.FinishAttempt(ctx, req, d.Deployment, "a1", routing.Result{Classification: serverErr, Started: e.clock.Now()})
	if err != nil {
		t.Fatalf("FinishAttempt under a cancelled context: %v", err)
	}
	if !tr.Opened {
		t.Fatalf("the failure recorded after the cancel did not open the circuit (allowedFails 0): %+v", tr)
	}
	if got := e.state("a").Metrics.InFlight; got != 0 {
		t.Fatalf("in flight = %d after the finish, want 0", got)
	}
	for i, left := range st.deadlines {
		if left <= 0 || left > 3*time.Second {
			t.Fatalf("recording call %d ran with %v left, want a deadline within RecordTimeout (3s)", i, left)
		}
	}
}

// TestLateFailureAfterRecoveryKeepsCircuitClosed: an attempt that started before the probe
// closed the circuit fails afterwards; the router passes its start so the store can tell it
// is late (behaviour §5.5), and the deployment stays available.
func TestLateFailureAfterRecoveryKeepsCircuitClosed(t *testing.T) {
	e := newEnv(t, cfgOf(settings(allowedFails(0)), dep("a", "m")))
	slow := e.request("m")
	ds := e.mustAttempt(slow, nil)
	slowStart := e.clock.Now()
	if err := e.router.StartAttempt(context.Background(), ds.Deployment, "slow/0", ds.Deadline, ds.Reserved); err != nil {
		t.Fatal(err)
	}

	opener := e.request("m")
	e.run(opener, &routing.History{}, e.mustAttempt(opener, nil), serverErr)
	if st := e.state("a").Circuit; !st.Open {
		t.Fatalf("circuit not open after a failure with allowedFails 0: %+v", st)
	}
	e.clock.Advance(5 * time.Second) // cooldownSeconds: half-open
	probe := e.request("m")
	dp := e.mustAttempt(probe, nil)
	if !dp.Probe {
		t.Fatalf("decision at half-open is not the probe: %+v", dp)
	}
	probeStart := e.clock.Now()
	if tr, err := e.router.FinishAttempt(context.Background(), probe, dp.Deployment, "probe/0", routing.Result{Classification: ok, Started: probeStart, Latency: time.Second}); err != nil || !tr.Closed {
		t.Fatalf("successful probe: %+v %v", tr, err)
	}

	e.clock.Advance(time.Second)
	tr, err := e.router.FinishAttempt(context.Background(), slow, ds.Deployment, "slow/0", routing.Result{Classification: serverErr, Started: slowStart})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Opened || tr.Counted {
		t.Fatalf("a failure of an attempt started before the recovery reopened the circuit: %+v", tr)
	}
	if d := e.decide(e.request("m"), nil); d.Action != routing.ActionAttempt || d.Deployment.ID != "a" {
		t.Fatalf("after the late failure the deployment is not available: %+v", d)
	}
}

// TestProbeFreedWhenOwnerEndsWithoutVerdict: the probe owner's attempt ends with a request
// fault (no verdict on recovery); the next request probes at once instead of being told to
// wait halfOpenProbeSeconds (behaviour §5.4).
func TestProbeFreedWhenOwnerEndsWithoutVerdict(t *testing.T) {
	e := newEnv(t, cfgOf(settings(allowedFails(0)), dep("a", "m")))
	opener := e.request("m")
	e.run(opener, &routing.History{}, e.mustAttempt(opener, nil), serverErr)
	e.clock.Advance(5 * time.Second) // cooldownSeconds: half-open

	owner := e.request("m")
	dp := e.mustAttempt(owner, nil)
	if !dp.Probe {
		t.Fatalf("decision at half-open is not the probe: %+v", dp)
	}
	if stop := e.mustStop(e.request("m"), nil); stop.Code != "model_overloaded" {
		t.Fatalf("a second request while the probe runs: %+v, want model_overloaded", stop)
	}
	tr, err := e.router.FinishAttempt(context.Background(), owner, dp.Deployment, "owner/0", routing.Result{Classification: badRequest, Started: e.clock.Now()})
	if err != nil || !tr.ProbeReleased {
		t.Fatalf("the owner's request fault: %+v %v, want the probe released", tr, err)
	}
	if d := e.mustAttempt(e.request("m"), nil); !d.Probe || d.Deployment.ID != "a" {
		t.Fatalf("the next request after the release: %+v, want the probe on a", d)
	}
}

// TestQuarantineStaysUnavailableAfterFailedProbe: a quarantined deployment whose probe fails
// stays quarantined: the stop is still model_unavailable, and the next cooldown doubles the
// quarantine's (behaviour §5.4, §5.6, §7.5).
func TestQuarantineStaysUnavailableAfterFailedProbe(t *testing.T) {
	e := newEnv(t, cfgOf(settings(func(rs *configv1.RouterSettings) { rs.ConfigurationCooldownSeconds = proto.Uint32(40) }), dep("a", "m")), withRand(fixedRand(0)))
	first := e.request("m")
	e.run(first, &routing.History{}, e.mustAttempt(first, nil), badKey)
	if stop := e.mustStop(e.request("m"), nil); stop.Code != "model_unavailable" {
		t.Fatalf("while quarantined: %+v, want model_unavailable", stop)
	}
	e.clock.Advance(40 * time.Second)
	probe := e.request("m")
	dp := e.mustAttempt(probe, nil)
	if !dp.Probe {
		t.Fatalf("decision after the quarantine is not the probe: %+v", dp)
	}
	tr, err := e.router.FinishAttempt(context.Background(), probe, dp.Deployment, "probe/0", routing.Result{Classification: serverErr, Started: e.clock.Now()})
	if err != nil || !tr.Reopened {
		t.Fatalf("failed probe: %+v %v", tr, err)
	}
	if got := tr.Circuit.OpenUntil.Sub(e.clock.Now()); got != 80*time.Second {
		t.Fatalf("cooldown after the failed probe = %v, want 80 s (the 40 s quarantine doubled)", got)
	}
	if stop := e.mustStop(e.request("m"), nil); stop.Code != "model_unavailable" {
		t.Fatalf("after the failed probe: %+v, want model_unavailable (still quarantined)", stop)
	}
}
