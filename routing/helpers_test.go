package routing_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-gw/switchyard/internal/fakeclock"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
)

func newClock() *fakeclock.Clock {
	return fakeclock.New(time.Date(2030, 5, 6, 7, 8, 0, 0, time.UTC))
}

// seededRand is a deterministic, goroutine-safe Rand.
type seededRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newRand(seed uint64) *seededRand {
	return &seededRand{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (s *seededRand) Float64() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.Float64()
}

// fixedRand always returns v; countingRand counts calls.
type fixedRand float64

func (f fixedRand) Float64() float64 { return float64(f) }

type countingRand struct {
	mu    sync.Mutex
	calls int
	inner routing.Rand
}

func (c *countingRand) Float64() float64 {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.inner.Float64()
}

// env is a router over a memory store with a fake clock.
type env struct {
	t      testing.TB
	router *routing.Router
	store  store.Store
	clock  *fakeclock.Clock
	live   *config.Live
	seq    int
}

func newEnv(t testing.TB, cfg *configv1.Config, opts ...func(*routing.Options)) *env {
	t.Helper()
	return newEnvOn(t, memstore.New(), cfg, opts...)
}

// newEnvOn is newEnv over the store st.
func newEnvOn(t testing.TB, st store.Store, cfg *configv1.Config, opts ...func(*routing.Options)) *env {
	t.Helper()
	v, err := config.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Config(cfg); err != nil {
		t.Fatalf("test configuration invalid: %v", err)
	}
	snap, err := config.Compile(1, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: st, clock: newClock(), live: config.NewLive(snap)}
	o := routing.Options{Clock: e.clock, Rand: newRand(1)}
	for _, f := range opts {
		f(&o)
	}
	e.router = routing.New(e.live, e.store, o)
	return e
}

func withRand(r routing.Rand) func(*routing.Options) {
	return func(o *routing.Options) { o.Rand = r }
}

// dep builds a deployment of model with weight 1.
func dep(id, model string, mods ...func(*configv1.Deployment)) *configv1.Deployment {
	d := &configv1.Deployment{
		Id: id, PublicModel: model, Provider: "openai", BaseUrl: "https://api.example.com",
		ProviderModel: model + "-upstream", Weight: proto.Uint32(1),
	}
	for _, m := range mods {
		m(d)
	}
	return d
}

func weight(w uint32) func(*configv1.Deployment) {
	return func(d *configv1.Deployment) { d.Weight = proto.Uint32(w) }
}

func domain(fd string) func(*configv1.Deployment) {
	return func(d *configv1.Deployment) { d.FailureDomain = fd }
}

func settings(mods ...func(*configv1.RouterSettings)) *configv1.RouterSettings {
	rs := &configv1.RouterSettings{}
	for _, m := range mods {
		m(rs)
	}
	return rs
}

func strategy(s string) func(*configv1.RouterSettings) {
	return func(rs *configv1.RouterSettings) { rs.RoutingStrategy = proto.String(s) }
}

func cfgOf(rs *configv1.RouterSettings, deps ...*configv1.Deployment) *configv1.Config {
	return &configv1.Config{RouterSettings: rs, Deployments: deps}
}

func (e *env) request(model string) *routing.Request {
	e.seq++
	return &routing.Request{ID: fmt.Sprintf("req-%d", e.seq), Model: model, Operation: config.OpText, Start: e.clock.Now()}
}

func (e *env) decide(req *routing.Request, h *routing.History) routing.Decision {
	e.t.Helper()
	return e.router.Decide(context.Background(), req, h)
}

// mustAttempt decides and fails the test unless the decision is an attempt.
func (e *env) mustAttempt(req *routing.Request, h *routing.History) routing.Decision {
	e.t.Helper()
	d := e.decide(req, h)
	if d.Action != routing.ActionAttempt {
		e.t.Fatalf("decision = stop %+v, want an attempt", d.Stop)
	}
	return d
}

// mustStop decides and fails the test unless the decision is a stop.
func (e *env) mustStop(req *routing.Request, h *routing.History) *routing.StopError {
	e.t.Helper()
	d := e.decide(req, h)
	if d.Action != routing.ActionStop {
		e.t.Fatalf("decision = attempt on %s, want a stop", d.Deployment.ID)
	}
	return d.Stop
}

// run records a full attempt on the decided deployment with the given classification and
// appends it to h.
func (e *env) run(req *routing.Request, h *routing.History, d routing.Decision, c failure.Classification) {
	e.t.Helper()
	attemptID := fmt.Sprintf("%s/%d", req.ID, len(h.Attempts))
	if err := e.router.StartAttempt(context.Background(), d.Deployment, attemptID, d.Deadline, d.Reserved); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.router.FinishAttempt(context.Background(), req, d.Deployment, attemptID, routing.Result{Classification: c, Latency: time.Second, CompletionTokens: 10, TotalTokens: 20, Reserved: d.Reserved}); err != nil {
		e.t.Fatal(err)
	}
	h.Skip(d.Skips)
	a := d.Attempt()
	a.Finish(c, time.Second)
	// As attemptstate.State.Finish records it: the chain the attempt was chosen under is
	// the one the next decision follows.
	h.Reason, h.ReasonFrom = a.Reason, a.ReasonFrom
	h.Attempts = append(h.Attempts, a)
}

// Classifications used across tests.
var (
	ok         = failure.Classification{Class: failure.ClassNone, Status: 200}
	serverErr  = failure.Classification{Class: failure.ClassTransient, Kind: failure.KindServerError, Status: 500, Type: "server_error", Message: "The server had an error while processing your request."}
	throttled  = failure.Classification{Class: failure.ClassThrottle, Kind: failure.KindRateLimit, Status: 429, Code: "rate_limit_exceeded", Message: "Rate limit reached."}
	badKey     = failure.Classification{Class: failure.ClassConfiguration, Kind: failure.KindAuth, Status: 401, Code: "invalid_api_key", Message: "Incorrect API key provided."}
	badRequest = failure.Classification{Class: failure.ClassRequest, Kind: failure.KindInvalidRequest, Status: 400, Type: "invalid_request_error", Code: "decimal_above_max_value", Message: "Invalid 'temperature': decimal above maximum value."}
	tooLong    = failure.Classification{Class: failure.ClassRequest, Kind: failure.KindContextOverflow, Status: 400, Code: "context_length_exceeded", Message: "This model's maximum context length is 4097 tokens."}
	flagged    = failure.Classification{Class: failure.ClassRequest, Kind: failure.KindPolicy, Status: 400, Code: "content_filter", Message: "The response was filtered."}
)

// state reads one deployment's state through the store.
func (e *env) state(id string) store.DeploymentState {
	e.t.Helper()
	snap := e.live.Load()
	d := snap.Deployments[id]
	out := make([]store.DeploymentState, 1)
	if err := e.store.ReadStates(context.Background(), e.clock.Now(), []store.DeploymentRef{d.Ref()}, out); err != nil {
		e.t.Fatal(err)
	}
	return out[0]
}

// counts runs n fresh decisions and counts the chosen deployments.
func (e *env) counts(model string, n int) map[string]int {
	e.t.Helper()
	got := make(map[string]int)
	for range n {
		d := e.mustAttempt(e.request(model), nil)
		got[d.Deployment.ID]++
	}
	return got
}
