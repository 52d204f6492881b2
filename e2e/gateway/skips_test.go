package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/gjson"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/internal/redistest"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
	"github.com/switchyard-gw/switchyard/routing/store/storetest"
)

const chatBody = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`

// redisReplicas is the options of a gateway of two replicas sharing one real Redis, the
// route role on one and the attempt role on the other.
func redisReplicas(t *testing.T, o gatewayOptions) gatewayOptions {
	t.Helper()
	srv := redistest.Start(t)
	prefix := redistest.Prefix(t)
	var stores []store.Store
	for range 2 {
		st, err := redisstore.New(redis.NewClient(&redis.Options{Addr: srv.Addr()}), redisstore.WithPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		stores = append(stores, st)
	}
	o.store, o.replicas, o.replicaStores = stores[0], 2, stores
	return o
}

// insideOneMinute waits, when the wall-clock minute is about to end, for the next one: the
// limits count per minute (store.MinuteOf), and the requests of one test must share it.
func insideOneMinute(t *testing.T) time.Time {
	t.Helper()
	now := time.Now()
	if s := now.Second(); s >= 45 {
		time.Sleep(time.Duration(61-s) * time.Second)
		now = time.Now()
	}
	return now
}

// skipsTotal sums switchyard_skips_total of reason for model over every replica.
func (g *gateway) skipsTotal(model, reason string) float64 {
	g.t.Helper()
	var n float64
	for _, r := range g.replicas {
		mfs, err := r.reg.Gather()
		if err != nil {
			g.t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "switchyard_skips_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["gen_ai_request_model"] == model && labels["reason"] == reason {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// records returns the JSON log records with message msg.
func (g *gateway) records(msg string) []gjson.Result {
	var out []gjson.Result
	for _, line := range strings.Split(g.logs.String(), "\n") {
		if r := gjson.Parse(line); r.Get("msg").String() == msg {
			out = append(out, r)
		}
	}
	return out
}

// skipsOf renders a skipped list (unified_routing's or a log record's) for comparison.
func skipsOf(list gjson.Result) string {
	var parts []string
	for _, s := range list.Array() {
		parts = append(parts, fmt.Sprintf("%s/%s:%s(%s)", s.Get("deployment"), s.Get("model"), s.Get("reason"), s.Get("detail")))
	}
	return strings.Join(parts, ",")
}

// TestRPMLimitIsHardThroughTheGateway (behaviour §4.1): 50 concurrent requests against a
// deployment with rpmLimit 5 start exactly 5 attempts on it in the minute, on the memory
// store and on Redis shared by two replicas (the route role reserving on one, the attempt
// role starting on the other). The others fail over to the spare deployment, each recording
// lim as a limit skip in unified_routing, in its log record and in switchyard_skips_total;
// without a spare they get the dialect's 429 rate_limit_exceeded before any upstream call.
func TestRPMLimitIsHardThroughTheGateway(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		for _, spare := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/spare=%v", backend, spare), func(t *testing.T) {
				deps := []deployment{{ID: "lim", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI, Price: 1, RPMLimit: 5}}
				if spare {
					deps = append(deps, deployment{ID: "spare", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI, Price: 2})
				}
				o := gatewayOptions{settings: priceBased()} // lim, the cheaper, is always the first choice
				if backend == "redis" {
					o = redisReplicas(t, o)
				}
				g := startGateway(t, deps, o)
				began := insideOneMinute(t)

				type answer struct {
					status           int
					code, deployment string
					skipped          string
				}
				var mu sync.Mutex
				var answers []answer
				storetest.Concurrently(50, func(int) {
					resp, body, err := g.tryPost("/v1/chat/completions", chatBody, map[string]string{"x-unified-routing-metadata": "true"})
					a := answer{}
					if err != nil {
						a.code = err.Error()
					} else {
						u := gjson.GetBytes(body, "unified_routing")
						a = answer{status: resp.StatusCode, code: gjson.GetBytes(body, "error.code").String(),
							deployment: u.Get("deployment").String(), skipped: skipsOf(u.Get("skipped"))}
					}
					mu.Lock()
					answers = append(answers, a)
					mu.Unlock()
				})
				if store.MinuteOf(began) != store.MinuteOf(time.Now()) {
					t.Fatal("the requests crossed a minute boundary; the test must run inside one minute")
				}

				limitSkip := "lim/gpt-4o:limit(rpmLimit reached this minute)"
				got := map[string]int{}
				for _, a := range answers {
					switch {
					case a.status == http.StatusOK && a.deployment == "lim" && a.skipped == "":
						got["lim"]++
					case a.status == http.StatusOK && a.deployment == "spare" && a.skipped == limitSkip:
						got["spare after a limit skip"]++
					case a.status == http.StatusTooManyRequests && a.code == "rate_limit_exceeded":
						got["429"]++
					default:
						got[fmt.Sprintf("%+v", a)]++
					}
				}
				want := map[string]int{"lim": 5, "429": 45}
				if spare {
					want = map[string]int{"lim": 5, "spare after a limit skip": 45}
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("answers %v, want %v", got, want)
				}
				if served := g.served(); served["lim"] != 5 || served["spare"] != want["spare after a limit skip"] {
					t.Errorf("providers served %v, want lim exactly 5", served)
				}
				if n := g.skipsTotal("gpt-4o", "limit"); n != 45 {
					t.Errorf("switchyard_skips_total{reason=limit} = %v, want 45", n)
				}
				msg := "request stopped"
				if spare {
					msg = "request served"
				}
				logged := 0
				for _, r := range g.records(msg) {
					if skipsOf(r.Get("skipped")) == limitSkip {
						logged++
					}
				}
				if logged != 45 {
					t.Errorf("%d %q log records name lim's limit skip, want 45", logged, msg)
				}
				eventually(t, "in-flight back to 0", func() bool { return g.inFlight("lim", "spare") == 0 })
			})
		}
	}
}

// TestCapabilitySkipIsVisible (behaviour §9.2): a deployment that cannot keep the request's
// contract is passed over, and the skip shows in unified_routing, the log record and the
// counter.
func TestCapabilitySkipIsVisible(t *testing.T) {
	g := startGateway(t, []deployment{
		{ID: "notools", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI, Price: 1,
			Capabilities: &configv1.Capabilities{Tools: proto.Bool(false)}},
		{ID: "tools", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI, Price: 2},
	}, gatewayOptions{settings: priceBased()})
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`
	resp, out := g.post("/v1/chat/completions", body, map[string]string{"x-unified-routing-metadata": "true"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, out)
	}
	u := gjson.GetBytes(out, "unified_routing")
	want := "notools/gpt-4o:capability(tools not supported)"
	if u.Get("deployment").String() != "tools" || skipsOf(u.Get("skipped")) != want {
		t.Fatalf("unified_routing %s, want tools served and skipped %s", u.Raw, want)
	}
	if rs := g.records("request served"); len(rs) != 1 || skipsOf(rs[0].Get("skipped")) != want {
		t.Errorf("request served records %v, want one naming %s", rs, want)
	}
	if n := g.skipsTotal("gpt-4o", "capability"); n != 1 {
		t.Errorf("switchyard_skips_total{reason=capability} = %v, want 1", n)
	}
}

// TestCancelDuringWaitGivesTheReservationBack: the retry decided before a backoff reserved
// its request in lim's minute; the client leaves during the wait, the attempt is never sent,
// and the minute gets it back.
func TestCancelDuringWaitGivesTheReservationBack(t *testing.T) {
	g := startGateway(t, []deployment{{ID: "lim", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI, RPMLimit: 10}}, gatewayOptions{})
	insideOneMinute(t)
	rpm := func() int64 {
		out := make([]store.DeploymentState, 1)
		if err := g.store.ReadStates(context.Background(), time.Now(), []store.DeploymentRef{{ID: "lim", Domain: store.DomainOf("lim", "")}}, out); err != nil {
			t.Fatal(err)
		}
		return out[0].Metrics.RPM
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.base+"/v1/chat/completions", strings.NewReader(chatBody))
		if err != nil {
			done <- err
			return
		}
		req.Header.Set(fakeprovider.FaultHeader, "status=500; retry-after=20")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	eventually(t, "the retry wait", func() bool { return strings.Contains(g.logs.String(), "waiting before the next attempt") })
	if n := rpm(); n != 2 {
		t.Fatalf("rpm during the wait = %d, want 2 (the first attempt and the retry's reservation)", n)
	}
	cancel()
	<-done
	eventually(t, "the route role noticing the cancel", func() bool {
		return strings.Contains(g.logs.String(), "request cancelled during a retry wait")
	})
	if n := rpm(); n != 1 {
		t.Fatalf("rpm after the cancel = %d, want 1: the retry was never sent", n)
	}
}
