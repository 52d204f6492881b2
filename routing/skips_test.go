package routing_test

import (
	"net/http"
	"testing"

	"github.com/switchyard-gw/switchyard/routing"
)

// Behaviour §4.1, §9.2: a deployment passed over for its limits is recorded as a limit skip,
// once per request.
func TestLimitSkipIsRecordedOnce(t *testing.T) {
	e := newEnv(t, cfgOf(settings(), dep("lim", "m", rpmLimit(1), weight(1000)), dep("spare", "m")))
	e.busy("lim", 1) // lim's only request this minute
	req, h := e.request("m"), &routing.History{}
	d := e.mustAttempt(req, h)
	want := routing.Skip{Deployment: "lim", Model: "m", Cause: routing.SkipLimit, Why: "rpmLimit reached this minute"}
	if d.Deployment.ID != "spare" || len(d.Skips) != 1 || d.Skips[0] != want {
		t.Fatalf("decision %s skips %+v, want spare with %+v", d.Deployment.ID, d.Skips, want)
	}
	e.run(req, h, d, serverErr)
	d = e.mustAttempt(req, h)
	if len(d.Skips) != 0 || len(h.Skips) != 1 {
		t.Fatalf("second decision skips %+v, history %+v: want the skip recorded once", d.Skips, h.Skips)
	}
}

// A client key's allow-list covers fallbacks: a gpt-4o-only request whose chain names
// gpt-4o-mini never reaches gpt-4o-mini; the target is recorded as a policy skip and the
// request ends with what gpt-4o said.
func TestAllowListCoversFallbacks(t *testing.T) {
	cfg := withChains(cfgOf(settings(allowedFails(5)), dep("big", "gpt-4o"), dep("mini", "gpt-4o-mini"), dep("other", "claude")),
		chain("gpt-4o", "general", "gpt-4o-mini", "claude"))
	e := newEnv(t, cfg)
	req, h := e.request("gpt-4o"), &routing.History{}
	req.Models = []string{"gpt-4o", "claude"}
	d := e.mustAttempt(req, h)
	want := routing.Skip{Model: "gpt-4o-mini", Cause: routing.SkipPolicy, Why: "the API key may not use this model"}
	if d.Deployment.ID != "big" || len(d.Skips) != 1 || d.Skips[0] != want {
		t.Fatalf("first decision %s skips %+v, want big with %+v", d.Deployment.ID, d.Skips, want)
	}
	e.run(req, h, d, serverErr)
	if d = e.mustAttempt(req, h); d.Deployment.ID != "other" || d.Move != routing.MoveFallback {
		t.Fatalf("fallback went to %s (%s), want other (claude), the allowed target", d.Deployment.ID, d.Move)
	}
	e.run(req, h, d, serverErr)
	// Budget of 3 left: only big may be asked again, never mini.
	for d = e.decide(req, h); d.Action == routing.ActionAttempt; d = e.decide(req, h) {
		if d.Deployment.ID == "mini" {
			t.Fatal("the fallback chain served gpt-4o-mini to a key without it")
		}
		e.run(req, h, d, serverErr)
	}
	if d.Stop.Status != http.StatusInternalServerError {
		t.Fatalf("stop %+v, want what the last upstream said (500)", d.Stop)
	}
	// No allow-list: the same chain serves gpt-4o-mini.
	free, fh := e.request("gpt-4o"), &routing.History{}
	d = e.mustAttempt(free, fh)
	e.run(free, fh, d, serverErr)
	if d = e.mustAttempt(free, fh); d.Deployment.ID != "mini" {
		t.Fatalf("without an allow-list the fallback went to %s, want mini", d.Deployment.ID)
	}
}
