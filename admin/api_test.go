package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
)

const deploymentBody = `{"id":"d2","publicModel":"gpt-4o","provider":"openai","baseUrl":"https://api.openai.com",
	"providerModel":"gpt-4o","apiKey":"sk-live-SECRET-0002","weight":2}`

// behaviour §11.1: a partial PUT keeps the omitted fields, GET shows the effective settings, bad
// values are a 400 naming the field; the change reaches the other replica.
func TestRouterSettings(t *testing.T) {
	onEveryStore(t, func(t *testing.T, replica func() store.Store) {
		e := newEnv(t, replica)
		got, resp := e.want(http.StatusOK, "GET", "/admin/router-settings", "")
		if got["allowedFails"] != float64(config.DefaultAllowedFails) || got["routingStrategy"] != "simple-shuffle" || resp.Header.Get("ETag") == "" {
			t.Fatalf("GET effective settings = %v (ETag %q), want the defaults and an ETag", got, resp.Header.Get("ETag"))
		}
		eps, _ := got["executionPolicies"].(map[string]any)
		if len(eps) != len(config.Operations()) {
			t.Fatalf("GET shows %d execution-policy operations, want the whole matrix", len(eps))
		}
		e.want(http.StatusOK, "PUT", "/admin/router-settings", `{"allowedFails":7}`)
		got, _ = e.want(http.StatusOK, "PUT", "/admin/router-settings", `{"cooldownSeconds":9}`)
		if got["allowedFails"] != float64(7) || got["cooldownSeconds"] != float64(9) {
			t.Fatalf("after two partial PUTs: %v, want allowedFails 7 kept and cooldownSeconds 9", got)
		}
		e.eventually("allowedFails 7", func(s *config.Snapshot) bool {
			return s.Settings.Circuit.AllowedFails == 7 && s.Settings.Circuit.Cooldown.Seconds() == 9
		})

		e.wantField("allowedFails", "PUT", "/admin/router-settings", `{"allowedFails":20000}`)
		e.wantField("routingStrategy", "PUT", "/admin/router-settings", `{"routingStrategy":"round-robin"}`)
		e.wantField("allowedFail", "PUT", "/admin/router-settings", `{"allowedFail":1}`)
		// The matrix is sent whole: one operation alone is refused.
		text, _ := json.Marshal(map[string]any{"executionPolicies": map[string]any{"text": eps["text"]}})
		e.wantField("executionPolicies", "PUT", "/admin/router-settings", string(text))
		// Sent whole, it replaces the matrix.
		eps["embeddings"].(map[string]any)["json"].(map[string]any)["maxAttempts"] = 1
		whole, _ := json.Marshal(map[string]any{"executionPolicies": eps})
		got, _ = e.want(http.StatusOK, "PUT", "/admin/router-settings", string(whole))
		if m := got["executionPolicies"].(map[string]any)["embeddings"].(map[string]any)["json"].(map[string]any)["maxAttempts"]; m != float64(1) || got["allowedFails"] != float64(7) {
			t.Fatalf("after the matrix PUT: embeddings maxAttempts %v, allowedFails %v; want 1 and 7", m, got["allowedFails"])
		}
		// Valid alone, but a lowered global totalMs turns a deployment's override into a
		// raise: the whole configuration is checked, the conflict named where it is.
		e.want(http.StatusCreated, "POST", "/admin/deployments", `{"id":"ov","publicModel":"gpt-4o","provider":"openai",
			"baseUrl":"https://api.openai.com","providerModel":"gpt-4o","apiKey":"sk-ov",
			"executionPolicyOverrides":{"text":{"json":{"totalMs":900000}}}}`)
		eps["text"].(map[string]any)["json"].(map[string]any)["totalMs"] = 600000
		lowered, _ := json.Marshal(map[string]any{"executionPolicies": eps})
		out, _ := e.want(http.StatusBadRequest, "PUT", "/admin/router-settings", string(lowered))
		if !strings.Contains(fmt.Sprint(out), `executionPolicyOverrides["text"].json.totalMs`) {
			t.Fatalf("lowered global below an override: %v, want the override named", out)
		}
		// Nothing refused was stored.
		got, _ = e.want(http.StatusOK, "GET", "/admin/router-settings", "")
		if got["routingStrategy"] != "simple-shuffle" || got["allowedFails"] != float64(7) {
			t.Fatalf("a refused PUT changed the settings: %v", got)
		}
	})
}

// behaviour §11.2, §11.3: deployments are created, listed, changed and deleted; the key is
// write-only (apiKeySet instead; kept by a PUT without it; never in an answer or a log).
func TestDeploymentsCRUDAndWriteOnlyKeys(t *testing.T) {
	onEveryStore(t, func(t *testing.T, replica func() store.Store) {
		e := newEnv(t, replica)
		got, _ := e.want(http.StatusCreated, "POST", "/admin/deployments", deploymentBody)
		if got["apiKeySet"] != true || got["apiKey"] != nil || got["weight"] != float64(2) {
			t.Fatalf("POST answer %v, want apiKeySet true and no apiKey", got)
		}
		e.want(http.StatusConflict, "POST", "/admin/deployments", deploymentBody)
		list, _ := e.want(http.StatusOK, "GET", "/admin/deployments", "")
		data := list["data"].([]any)
		if len(data) != 2 {
			t.Fatalf("list = %v, want the seeded and the new deployment", list)
		}
		for _, d := range data {
			if d.(map[string]any)["apiKeySet"] != true {
				t.Fatalf("listed %v without apiKeySet true", d)
			}
		}
		e.eventually("d2 with its key", func(s *config.Snapshot) bool {
			d := s.Deployments["d2"]
			return d != nil && d.APIKey == "sk-live-SECRET-0002"
		})

		// A PUT without apiKey (a GET body sent back, apiKeySet included) keeps the key.
		one, _ := e.want(http.StatusOK, "GET", "/admin/deployments/d2", "")
		one["weight"] = 5
		body, _ := json.Marshal(one)
		got, _ = e.want(http.StatusOK, "PUT", "/admin/deployments/d2", string(body))
		if got["apiKeySet"] != true || got["weight"] != float64(5) {
			t.Fatalf("keyless PUT answered %v", got)
		}
		snap, err := e.st.LoadConfig(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if snap.Secrets["d2"] != "sk-live-SECRET-0002" || snap.Secrets["seed"] != seedKey {
			t.Fatal("a keyless PUT lost a stored key")
		}
		e.eventually("d2 at weight 5, key kept", func(s *config.Snapshot) bool {
			d := s.Deployments["d2"]
			return d != nil && d.Weight == 5 && d.APIKey == "sk-live-SECRET-0002"
		})
		// Rotation.
		e.want(http.StatusOK, "PUT", "/admin/deployments/d2", strings.Replace(deploymentBody, "sk-live-SECRET-0002", "sk-rotated-SECRET-0003", 1))
		e.eventually("the rotated key", func(s *config.Snapshot) bool {
			d := s.Deployments["d2"]
			return d != nil && d.APIKey == "sk-rotated-SECRET-0003"
		})

		// 400s name the body's fields, including those found by whole-config rules.
		e.wantField("weight", "PUT", "/admin/deployments/d2", strings.Replace(deploymentBody, `"weight":2`, `"weight":2000000`, 1))
		e.wantField("id", "PUT", "/admin/deployments/other", deploymentBody)
		e.wantField("apiKey", "PUT", "/admin/deployments/d2", strings.Replace(deploymentBody, `"sk-live-SECRET-0002"`, `12345`, 1))
		raise := strings.Replace(deploymentBody, `"weight":2`, `"weight":2,"executionPolicyOverrides":{"text":{"json":{"maxAttempts":9}}}`, 1)
		e.wantField(`executionPolicyOverrides["text"].json.maxAttempts`, "PUT", "/admin/deployments/d2", raise)
		// A new id through PUT creates it.
		e.want(http.StatusCreated, "PUT", "/admin/deployments/d3", strings.Replace(deploymentBody, `"d2"`, `"d3"`, 1))

		e.want(http.StatusNoContent, "DELETE", "/admin/deployments/d2", "")
		e.want(http.StatusNotFound, "GET", "/admin/deployments/d2", "")
		e.want(http.StatusNotFound, "DELETE", "/admin/deployments/d2", "")
		e.eventually("d2 deleted", func(s *config.Snapshot) bool { return s.Deployments["d2"] == nil && s.Deployments["d3"] != nil })
		snap, err = e.st.LoadConfig(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := snap.Secrets["d2"]; ok {
			t.Fatal("a deleted deployment's key is still stored")
		}
	})
}

// Optimistic concurrency: GET gives the version as ETag; a write with a stale If-Match is a
// 412 that changes nothing; without If-Match a write applies.
func TestIfMatch(t *testing.T) {
	onEveryStore(t, func(t *testing.T, replica func() store.Store) {
		e := newEnv(t, replica)
		_, resp := e.want(http.StatusOK, "GET", "/admin/deployments/seed", "")
		stale := resp.Header.Get("ETag")
		_, resp = e.want(http.StatusOK, "PUT", "/admin/router-settings", `{"allowedFails":4}`, "If-Match", stale)
		fresh := resp.Header.Get("ETag")
		if fresh == "" || fresh == stale {
			t.Fatalf("write answered ETag %q after %q, want the new version", fresh, stale)
		}
		// The second operator still holds the old version.
		e.want(http.StatusPreconditionFailed, "PUT", "/admin/router-settings", `{"allowedFails":5}`, "If-Match", stale)
		e.want(http.StatusPreconditionFailed, "DELETE", "/admin/deployments/seed", "", "If-Match", stale)
		e.want(http.StatusPreconditionFailed, "POST", "/admin/deployments/seed/disable", "", "If-Match", stale)
		got, resp := e.want(http.StatusOK, "GET", "/admin/router-settings", "")
		if got["allowedFails"] != float64(4) || resp.Header.Get("ETag") != fresh {
			t.Fatalf("after refused writes: allowedFails %v, ETag %q; want 4 and %q", got["allowedFails"], resp.Header.Get("ETag"), fresh)
		}
		e.want(http.StatusOK, "PUT", "/admin/router-settings", `{"allowedFails":5}`, "If-Match", `W/"0", `+fresh)
		e.want(http.StatusOK, "PUT", "/admin/router-settings", `{"allowedFails":6}`, "If-Match", "*")
		e.want(http.StatusOK, "PUT", "/admin/router-settings", `{"allowedFails":7}`)
		e.wantField("If-Match", "PUT", "/admin/router-settings", `{"allowedFails":8}`, "If-Match", `"abc"`)
	})
}

// Writes without If-Match from two API replicas at once: the compare-and-swap re-reads and
// re-applies, so no write is lost.
func TestConcurrentWritesAreNotLost(t *testing.T) {
	onEveryStore(t, func(t *testing.T, replica func() store.Store) {
		a, b := newEnv(t, replica), newEnv(t, replica)
		const n = 6
		var wg sync.WaitGroup
		codes := make([]int, 2*n)
		for i := range 2 * n {
			e := a
			if i%2 == 1 {
				e = b
			}
			body := strings.Replace(deploymentBody, `"d2"`, fmt.Sprintf(`"c%d"`, i), 1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest("POST", e.url+"/admin/deployments", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+masterKey)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				resp.Body.Close()
				codes[i] = resp.StatusCode
			}()
		}
		wg.Wait()
		for i, c := range codes {
			if c != http.StatusCreated {
				t.Fatalf("concurrent POST %d answered %d, want 201", i, c)
			}
		}
		snap, err := a.st.LoadConfig(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Config.GetDeployments()) != 2*n+1 {
			t.Fatalf("%d deployments after %d concurrent creations, want %d: a write was lost", len(snap.Config.GetDeployments()), 2*n, 2*n+1)
		}
	})
}

// behaviour §1.2: kill switches for deployments and chains; fallback chain and model policy CRUD.
func TestKillSwitchesChainsPolicies(t *testing.T) {
	onEveryStore(t, func(t *testing.T, replica func() store.Store) {
		e := newEnv(t, replica)
		got, _ := e.want(http.StatusOK, "POST", "/admin/deployments/seed/disable", "")
		if got["enabled"] != false || got["apiKeySet"] != true {
			t.Fatalf("disable answered %v", got)
		}
		e.eventually("seed disabled", func(s *config.Snapshot) bool { return !s.Deployments["seed"].Enabled })
		status, _ := e.want(http.StatusOK, "GET", "/v1/models/gpt-4o/deployments", "")
		if d := status["data"].([]any)[0].(map[string]any); d["state"] != "disabled" {
			t.Fatalf("status view after disable: %v", d)
		}
		e.want(http.StatusOK, "POST", "/admin/deployments/seed/enable", "")
		e.eventually("seed enabled", func(s *config.Snapshot) bool { return s.Deployments["seed"].Enabled })
		e.want(http.StatusNotFound, "POST", "/admin/deployments/nope/disable", "")

		// A chain whose public model holds a '/', addressed with %2F.
		chain := `{"publicModel":"meta/llama-3","reason":"general","targets":["gpt-4o"]}`
		e.want(http.StatusCreated, "POST", "/admin/fallback-chains", chain)
		e.want(http.StatusConflict, "POST", "/admin/fallback-chains", chain)
		e.wantField("targets", "POST", "/admin/fallback-chains", `{"publicModel":"x","reason":"general","targets":[]}`)
		e.wantField("reason", "PUT", "/admin/fallback-chains/x/general", `{"reason":"context_window","targets":["y"]}`)
		got, _ = e.want(http.StatusOK, "POST", "/admin/fallback-chains/meta%2Fllama-3/general/disable", "")
		if got["enabled"] != false {
			t.Fatalf("chain disable answered %v", got)
		}
		key := config.ChainKey{Model: "meta/llama-3", Reason: config.ReasonGeneral}
		e.eventually("the chain disabled", func(s *config.Snapshot) bool { c := s.Chains[key]; return c != nil && !c.Enabled })
		e.want(http.StatusOK, "POST", "/admin/fallback-chains/meta%2Fllama-3/general/enable", "")
		got, _ = e.want(http.StatusOK, "PUT", "/admin/fallback-chains/meta%2Fllama-3/general", `{"targets":["gpt-4o","gpt-4o-mini"]}`)
		if len(got["targets"].([]any)) != 2 || got["publicModel"] != "meta/llama-3" {
			t.Fatalf("chain PUT answered %v", got)
		}
		list, _ := e.want(http.StatusOK, "GET", "/admin/fallback-chains", "")
		if len(list["data"].([]any)) != 1 {
			t.Fatalf("chains = %v", list)
		}
		e.want(http.StatusOK, "GET", "/admin/fallback-chains/meta%2Fllama-3/general", "")
		e.want(http.StatusNoContent, "DELETE", "/admin/fallback-chains/meta%2Fllama-3/general", "")
		e.want(http.StatusNotFound, "GET", "/admin/fallback-chains/meta%2Fllama-3/general", "")

		e.want(http.StatusCreated, "PUT", "/admin/model-policies/gpt-4o", `{"crossModelFallbackAllowed":false}`)
		e.eventually("the policy", func(s *config.Snapshot) bool { return !s.Policy("gpt-4o").CrossModelFallbackAllowed })
		got, _ = e.want(http.StatusOK, "PUT", "/admin/model-policies/gpt-4o", `{"crossModelFallbackAllowed":true,"sameModelFailoverFirst":false}`)
		if got["publicModel"] != "gpt-4o" || got["sameModelFailoverFirst"] != false {
			t.Fatalf("policy PUT answered %v", got)
		}
		e.wantField("publicModel", "PUT", "/admin/model-policies/gpt-4o", `{"publicModel":"other"}`)
		list, _ = e.want(http.StatusOK, "GET", "/admin/model-policies", "")
		if len(list["data"].([]any)) != 1 {
			t.Fatalf("policies = %v", list)
		}
		e.want(http.StatusOK, "GET", "/admin/model-policies/gpt-4o", "")
		e.want(http.StatusNoContent, "DELETE", "/admin/model-policies/gpt-4o", "")
		e.want(http.StatusNotFound, "DELETE", "/admin/model-policies/gpt-4o", "")
	})
}

// Everything answers 401 without the master key, or with a wrong one.
func TestMasterKeyGuardsEverything(t *testing.T) {
	onEveryStore(t, func(t *testing.T, replica func() store.Store) {
		e := newEnv(t, replica)
		paths := []struct{ method, path string }{
			{"GET", "/admin/router-settings"}, {"PUT", "/admin/router-settings"},
			{"GET", "/admin/deployments"}, {"POST", "/admin/deployments"}, {"GET", "/admin/deployments/seed"},
			{"PUT", "/admin/deployments/seed"}, {"DELETE", "/admin/deployments/seed"}, {"POST", "/admin/deployments/seed/disable"},
			{"GET", "/admin/fallback-chains"}, {"DELETE", "/admin/fallback-chains/m/general"},
			{"GET", "/admin/model-policies"}, {"PUT", "/admin/model-policies/m"},
			{"GET", "/admin/client-keys"}, {"POST", "/admin/client-keys"}, {"DELETE", "/admin/client-keys/x"},
			{"GET", "/v1/models"}, {"GET", "/v1/models/gpt-4o/deployments"}, {"GET", "/admin/nothing-here"},
		}
		for _, key := range []string{"", "wrong", masterKey + "x"} {
			for _, p := range paths {
				resp, _ := e.doAs(key, p.method, p.path, `{}`)
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("%s %s with key %q: %d, want 401", p.method, p.path, key, resp.StatusCode)
				}
			}
		}
		if snap, _ := e.st.LoadConfig(t.Context()); len(snap.Config.GetDeployments()) != 1 || snap.Config.GetDeployments()[0].Enabled != nil {
			t.Fatal("an unauthenticated request changed the configuration")
		}
	})
}

// GET /v1/models on the admin listener: the OpenAI list of the public models in force.
func TestModelsList(t *testing.T) {
	onEveryStore(t, func(t *testing.T, replica func() store.Store) {
		e := newEnv(t, replica)
		e.want(http.StatusCreated, "POST", "/admin/deployments", strings.Replace(strings.Replace(deploymentBody, `"gpt-4o"`, `"alpha"`, 2), `"d2"`, `"a1"`, 1))
		e.eventually("the alpha group", func(s *config.Snapshot) bool { return s.Groups["alpha"] != nil })
		got, _ := e.want(http.StatusOK, "GET", "/v1/models", "")
		data := got["data"].([]any)
		if got["object"] != "list" || len(data) != 2 || data[0].(map[string]any)["id"] != "alpha" || data[1].(map[string]any)["id"] != "gpt-4o" || data[0].(map[string]any)["object"] != "model" {
			t.Fatalf("GET /v1/models = %v, want alpha and gpt-4o in OpenAI's list format", got)
		}
	})
}
