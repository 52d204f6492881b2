package routing_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/store/storetest"
)

// Behaviour §4.1: rpmLimit is hard. 50 requests decided at the same moment against a
// deployment with rpmLimit 5, before any of their attempts started (the route role decides,
// the attempt role starts the attempt later), start exactly 5 attempts on it in the minute;
// the others go to the spare deployment, or, without one, are refused with 429 before any
// upstream call.
func TestRPMLimitIsHardUnderConcurrency(t *testing.T) {
	onEachStore(t, func(t *testing.T, newEnv func(*configv1.Config, ...func(*routing.Options)) *env) {
		for _, spare := range []bool{false, true} {
			t.Run(fmt.Sprintf("spare=%v", spare), func(t *testing.T) {
				deps := []*configv1.Deployment{dep("lim", "m", rpmLimit(5), weight(1000))}
				if spare {
					deps = append(deps, dep("spare", "m"))
				}
				e := newEnv(cfgOf(settings(), deps...))
				decisions := make([]routing.Decision, 50)
				storetest.Concurrently(len(decisions), func(i int) {
					req := &routing.Request{ID: fmt.Sprintf("c%d", i), Model: "m", Start: e.clock.Now()}
					decisions[i] = e.router.Decide(context.Background(), req, nil)
				})
				var mu sync.Mutex
				got := map[string]int{}
				storetest.Concurrently(len(decisions), func(i int) {
					d := decisions[i]
					key := "stop"
					if d.Action == routing.ActionAttempt {
						key = d.Deployment.ID
						if err := e.router.StartAttempt(context.Background(), d.Deployment, fmt.Sprintf("c%d/1", i), d.Deadline, d.Reserved); err != nil {
							t.Error(err)
						}
					} else if d.Stop.Status != http.StatusTooManyRequests {
						key = fmt.Sprintf("stop %d %s", d.Stop.Status, d.Stop.Code)
					}
					mu.Lock()
					got[key]++
					mu.Unlock()
				})
				want := map[string]int{"lim": 5, "stop": 45}
				if spare {
					want = map[string]int{"lim": 5, "spare": 45}
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("50 concurrent requests: %v, want %v", got, want)
				}
				if m := e.state("lim").Metrics; m.RPM != 5 || m.InFlight != 5 {
					t.Fatalf("lim: rpm %d in flight %d, want 5 and 5 (each attempt counted once)", m.RPM, m.InFlight)
				}
			})
		}
	})
}

// Behaviour §4.1: tpmLimit is hard too. A decision reserves the request's estimate (prompt
// + max output tokens); the outcome replaces it with the usage the provider reported.
func TestTPMLimitReservesTheEstimateUntilTheOutcome(t *testing.T) {
	onEachStore(t, func(t *testing.T, newEnv func(*configv1.Config, ...func(*routing.Options)) *env) {
		e := newEnv(cfgOf(settings(), dep("lim", "m", tpmLimit(100))))
		req := func() *routing.Request {
			r := e.request("m")
			r.Facts.PromptTokens, r.Facts.MaxOutputTokens = 40, 10
			return r
		}
		r1, h1 := req(), &routing.History{}
		d1 := e.mustAttempt(r1, h1)
		if d1.Reserved.Tokens != 50 {
			t.Fatalf("reserved %d tokens, want the estimate 40 + 10", d1.Reserved.Tokens)
		}
		e.mustAttempt(req(), nil) // 100 tokens reserved: at the limit
		if st := e.mustStop(req(), nil); st.Status != http.StatusTooManyRequests {
			t.Fatalf("at tpmLimit by reservations: %+v, want 429", st)
		}
		e.run(r1, h1, d1, ok) // 20 real tokens: 100 - 50 + 20
		if m := e.state("lim").Metrics; m.TPM != 70 {
			t.Fatalf("tpm after the outcome = %d, want 70", m.TPM)
		}
		e.mustAttempt(req(), nil)
	})
}

// A reservation whose attempt is never made is given back.
func TestUnreserveGivesTheMinuteBack(t *testing.T) {
	onEachStore(t, func(t *testing.T, newEnv func(*configv1.Config, ...func(*routing.Options)) *env) {
		e := newEnv(cfgOf(settings(), dep("lim", "m", rpmLimit(1))))
		d := e.mustAttempt(e.request("m"), nil)
		e.mustStop(e.request("m"), nil)
		e.router.Unreserve(context.Background(), &d)
		if d.Reserved.At != (time.Time{}) {
			t.Fatal("the decision still holds its reservation")
		}
		if m := e.state("lim").Metrics; m.RPM != 0 {
			t.Fatalf("rpm after unreserve = %d, want 0", m.RPM)
		}
		e.mustAttempt(e.request("m"), nil)
	})
}

// A limited deployment that loses its probe race gives its reservation back.
func TestLostProbeGivesTheReservationBack(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			e := newEnvOn(t, rivalStore{b.open(t)}, cfgOf(settings(allowedFails(0)), dep("a", "m", rpmLimit(10))))
			e.failOnce("a")
			e.clock.Advance(5 * time.Second)
			e.mustStop(e.request("m"), nil)
			if m := e.state("a").Metrics; m.RPM != 0 {
				t.Fatalf("rpm after a lost probe = %d, want 0", m.RPM)
			}
		})
	}
}
