package routing_test

import (
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
)

func chain(model, reason string, targets ...string) *configv1.FallbackChain {
	return &configv1.FallbackChain{PublicModel: model, Reason: reason, Targets: targets}
}

func withChains(cfg *configv1.Config, chains ...*configv1.FallbackChain) *configv1.Config {
	cfg.FallbackChains = append(cfg.FallbackChains, chains...)
	return cfg
}

func TestFailoverBeforeFallback(t *testing.T) {
	cfg := withChains(cfgOf(settings(textJSON(600_000, 1_800_000, 5)), dep("p1", "primary"), dep("p2", "primary"), dep("f1", "backup")),
		chain("primary", "general", "backup"))
	e := newEnv(t, cfg)
	req, h := e.request("primary"), &routing.History{}
	var order []string
	for range 3 {
		d := e.mustAttempt(req, h)
		order = append(order, d.Deployment.ID)
		e.run(req, h, d, serverErr)
	}
	if order[2] != "f1" || order[0] == "f1" || order[1] == "f1" {
		t.Fatalf("attempt order %v, want both primary deployments before the fallback", order)
	}
	if h.Attempts[2].Model != "backup" {
		t.Fatalf("fallback attempt recorded model %q", h.Attempts[2].Model)
	}
}

func TestFallbackMoveAndReason(t *testing.T) {
	cfg := withChains(cfgOf(settings(), dep("p", "primary"), dep("f", "backup")), chain("primary", "general", "backup"))
	e := newEnv(t, cfg)
	req, h := e.request("primary"), &routing.History{}
	e.run(req, h, e.mustAttempt(req, h), serverErr)
	d := e.mustAttempt(req, h)
	if d.Deployment.ID != "f" || d.Move != routing.MoveFallback || d.Model != "backup" || d.Reason != config.ReasonGeneral || d.Wait != 0 {
		t.Fatalf("decision %+v, want an immediate general fallback to backup", d)
	}
}

func TestFallbackWhenPrimaryCoolingOrLimited(t *testing.T) {
	cfg := withChains(cfgOf(settings(allowedFails(0)), dep("p", "primary", rpmLimit(1)), dep("f", "backup")), chain("primary", "general", "backup"))
	e := newEnv(t, cfg)
	e.busy("p", 1) // at its rpm limit, no upstream call made by this request
	if d := e.mustAttempt(e.request("primary"), nil); d.Deployment.ID != "f" || d.Move != routing.MoveFirst {
		t.Fatalf("primary over its limit: %s (%v), want fallback f as the first attempt", d.Deployment.ID, d.Move)
	}
	e.clock.Advance(time.Minute)
	e.failOnce("p") // cooling down
	if d := e.mustAttempt(e.request("primary"), nil); d.Deployment.ID != "f" {
		t.Fatalf("primary cooling: %s, want f", d.Deployment.ID)
	}
}

func TestFallbackKillSwitchesAndPolicy(t *testing.T) {
	base := func() *configv1.Config {
		return withChains(cfgOf(settings(), dep("p", "primary"), dep("f", "backup")), chain("primary", "general", "backup"))
	}
	t.Run("chain switched off", func(t *testing.T) {
		cfg := base()
		cfg.FallbackChains[0].Enabled = proto.Bool(false)
		e := newEnv(t, cfg)
		req, h := e.request("primary"), &routing.History{}
		e.run(req, h, e.mustAttempt(req, h), serverErr)
		if d := e.decide(req, h); d.Action == routing.ActionAttempt && d.Deployment.ID == "f" {
			t.Fatal("fallback through a disabled chain")
		}
	})
	t.Run("crossModelFallbackAllowed false", func(t *testing.T) {
		cfg := base()
		cfg.ModelPolicies = []*configv1.ModelPolicy{{PublicModel: "primary", CrossModelFallbackAllowed: proto.Bool(false)}}
		e := newEnv(t, cfg)
		req, h := e.request("primary"), &routing.History{}
		e.run(req, h, e.mustAttempt(req, h), serverErr)
		if d := e.decide(req, h); d.Action == routing.ActionAttempt && d.Deployment.ID == "f" {
			t.Fatal("fell back to another model against the model's policy")
		}
	})
	t.Run("sameModelFailoverFirst false", func(t *testing.T) {
		cfg := withChains(cfgOf(settings(), dep("p1", "primary"), dep("p2", "primary"), dep("f", "backup")), chain("primary", "general", "backup"))
		cfg.ModelPolicies = []*configv1.ModelPolicy{{PublicModel: "primary", SameModelFailoverFirst: proto.Bool(false)}}
		e := newEnv(t, cfg)
		req, h := e.request("primary"), &routing.History{}
		e.run(req, h, e.mustAttempt(req, h), serverErr)
		if d := e.mustAttempt(req, h); d.Deployment.ID != "f" {
			t.Fatalf("after a failure: %s, want the fallback before the other primary deployment", d.Deployment.ID)
		}
	})
}

func TestDedicatedChainsForRefusals(t *testing.T) {
	cfg := withChains(cfgOf(settings(), dep("small", "m"), dep("small2", "m"), dep("big", "m-long"), dep("safe", "m-safe"), dep("gen", "m-general")),
		chain("m", "context_window", "m-long"), chain("m", "content_policy", "m-safe"), chain("m", "general", "m-general"))
	e := newEnv(t, cfg)

	req, h := e.request("m"), &routing.History{}
	e.run(req, h, e.mustAttempt(req, h), tooLong)
	d := e.mustAttempt(req, h)
	if d.Deployment.ID != "big" || d.Reason != config.ReasonContextWindow || d.Move != routing.MoveFallback {
		t.Fatalf("context overflow: %s reason %v move %v, want big via the context_window chain, never the other small deployment", d.Deployment.ID, d.Reason, d.Move)
	}

	req, h = e.request("m"), &routing.History{}
	e.run(req, h, e.mustAttempt(req, h), flagged)
	if d := e.mustAttempt(req, h); d.Deployment.ID != "safe" || d.Reason != config.ReasonContentPolicy {
		t.Fatalf("content policy: %s reason %v, want safe via content_policy", d.Deployment.ID, d.Reason)
	}

	// Without a dedicated chain the refusal ends the request with the provider's 400.
	e2 := newEnv(t, withChains(cfgOf(settings(), dep("small", "m"), dep("gen", "m-general")), chain("m", "general", "m-general")))
	req, h = e2.request("m"), &routing.History{}
	e2.run(req, h, e2.mustAttempt(req, h), tooLong)
	if st := e2.mustStop(req, h); st.Status != http.StatusBadRequest || st.Code != "context_length_exceeded" {
		t.Fatalf("context overflow without a chain: %+v, want the provider's 400", st)
	}
}

func tools(ok bool) func(*configv1.Deployment) {
	return func(d *configv1.Deployment) {
		if d.Capabilities == nil {
			d.Capabilities = &configv1.Capabilities{}
		}
		d.Capabilities.Tools = proto.Bool(ok)
	}
}

func TestCapabilityContract(t *testing.T) {
	cfg := withChains(cfgOf(settings(), dep("p", "primary", tools(true)), dep("notools", "cheap", tools(false)), dep("yes", "other", tools(true))),
		chain("primary", "general", "cheap", "other"))
	e := newEnv(t, cfg)
	req, h := e.request("primary"), &routing.History{}
	req.Facts.Tools = true
	e.run(req, h, e.mustAttempt(req, h), serverErr)
	d := e.mustAttempt(req, h)
	if d.Deployment.ID != "yes" {
		t.Fatalf("fallback to %s, want yes: cheap cannot keep the tools contract", d.Deployment.ID)
	}
	var skipped bool
	for _, s := range append(h.Skips, d.Skips...) {
		if s.Model == "cheap" {
			skipped = true
		}
	}
	if !skipped {
		t.Fatalf("the skip of the incompatible fallback model was not recorded: %+v", d.Skips)
	}
	// Recorded once: the next decision does not repeat skips already in the history.
	h.Skips = append(h.Skips, d.Skips...)
	e.run(req, h, d, serverErr)
	if d := e.decide(req, h); len(d.Skips) != 0 {
		t.Fatalf("skips recorded twice: %+v", d.Skips)
	}

	// Context window and output limits, and streaming.
	lim := func(d *configv1.Deployment) {
		d.Capabilities = &configv1.Capabilities{ContextWindow: 8000, MaxOutputTokens: 1000, Streaming: proto.Bool(false)}
	}
	e2 := newEnv(t, cfgOf(settings(), dep("small", "m", lim, weight(100)), dep("large", "m")))
	for _, tc := range []struct {
		name  string
		facts routing.Facts
		strm  bool
	}{
		{"prompt too big", routing.Facts{PromptTokens: 7500, MaxOutputTokens: 600}, false},
		{"max tokens too high", routing.Facts{MaxOutputTokens: 2000}, false},
		{"stream", routing.Facts{}, true},
	} {
		req := e2.request("m")
		req.Facts, req.Stream = tc.facts, tc.strm
		for range 20 {
			if d := e2.mustAttempt(req, nil); d.Deployment.ID != "large" {
				t.Fatalf("%s: chose %s", tc.name, d.Deployment.ID)
			}
		}
	}
	// Nothing keeps the contract: 400 naming the need, no upstream call.
	e3 := newEnv(t, cfgOf(settings(), dep("a", "m", tools(false))))
	req = e3.request("m")
	req.Facts.Tools = true
	if st := e3.mustStop(req, nil); st.Status != http.StatusBadRequest || st.Code != "capability_unsupported" {
		t.Fatalf("no deployment supports tools: %+v", st)
	}
}

func TestUnknownModel(t *testing.T) {
	e := newEnv(t, cfgOf(settings(), dep("a", "m")))
	if st := e.mustStop(e.request("nope"), nil); st.Status != http.StatusNotFound || st.Code != "model_not_found" {
		t.Fatalf("unknown model: %+v", st)
	}
}
