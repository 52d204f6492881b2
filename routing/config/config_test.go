package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/config"
)

func validator(t *testing.T) *config.Validator {
	t.Helper()
	v, err := config.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func goodDeployment() *configv1.Deployment {
	return &configv1.Deployment{Id: "d1", PublicModel: "gpt-4o", Provider: "openai", BaseUrl: "https://api.openai.com", ProviderModel: "gpt-4o"}
}

// fieldErrors returns the invalid fields of err, failing if err is not a ValidationError.
func fieldErrors(t *testing.T, err error) map[string]string {
	t.Helper()
	var ve *config.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v is not a *ValidationError", err)
	}
	out := map[string]string{}
	for _, fe := range ve.Errors {
		out[fe.Field] = fe.Message
	}
	return out
}

func TestValidationNamesTheField(t *testing.T) {
	v := validator(t)
	cases := []struct {
		name  string
		mut   func(*configv1.Config)
		field string
	}{
		{"unknown strategy", func(c *configv1.Config) {
			c.RouterSettings = &configv1.RouterSettings{RoutingStrategy: proto.String("round-robin")}
		}, "routerSettings.routingStrategy"},
		{"zero failure window", func(c *configv1.Config) {
			c.RouterSettings = &configv1.RouterSettings{FailureWindowSeconds: proto.Uint32(0)}
		}, "routerSettings.failureWindowSeconds"},
		{"whenAllOpen", func(c *configv1.Config) {
			c.RouterSettings = &configv1.RouterSettings{WhenAllOpen: proto.String("maybe")}
		}, "routerSettings.whenAllOpen"},
		{"provider", func(c *configv1.Config) { c.Deployments[0].Provider = "cohere" }, "deployments[0].provider"},
		{"missing publicModel", func(c *configv1.Config) { c.Deployments[0].PublicModel = "" }, "deployments[0].publicModel"},
		{"bad base URL", func(c *configv1.Config) { c.Deployments[0].BaseUrl = "not a url" }, "deployments[0].baseUrl"},
		{"rpm limit 0", func(c *configv1.Config) { c.Deployments[0].RpmLimit = proto.Uint64(0) }, "deployments[0].rpmLimit"},
		{"weight too big", func(c *configv1.Config) { c.Deployments[0].Weight = proto.Uint32(2_000_000) }, "deployments[0].weight"},
		{"duplicate id", func(c *configv1.Config) { c.Deployments = append(c.Deployments, goodDeployment()) }, "deployments[1].id"},
		{"mixed price", func(c *configv1.Config) {
			c.Deployments[0].Price = &configv1.Price{InputPerMillion: proto.Float64(1), SearchUnitCents: proto.Float64(1)}
		}, "deployments[0].price"},
		{"half a token price", func(c *configv1.Config) { c.Deployments[0].Price = &configv1.Price{InputPerMillion: proto.Float64(1)} }, "deployments[0].price"},
		{"unknown modality", func(c *configv1.Config) {
			c.Deployments[0].Capabilities = &configv1.Capabilities{Modalities: []string{"smell"}}
		}, "deployments[0].capabilities.modalities[0]"},
		{"chain to itself", func(c *configv1.Config) {
			c.FallbackChains = []*configv1.FallbackChain{{PublicModel: "gpt-4o", Reason: "general", Targets: []string{"gpt-4o"}}}
		}, "fallbackChains[0]"},
		{"chain reason", func(c *configv1.Config) {
			c.FallbackChains = []*configv1.FallbackChain{{PublicModel: "gpt-4o", Reason: "because", Targets: []string{"x"}}}
		}, "fallbackChains[0].reason"},
		{"nested map of messages", func(c *configv1.Config) {
			m := config.DefaultExecutionPolicies()
			m["text"].Json.ResponseMs = proto.Uint64(0)
			c.RouterSettings = &configv1.RouterSettings{ExecutionPolicies: m}
		}, `routerSettings.executionPolicies["text"].json.responseMs`},
		{"unknown override operation", func(c *configv1.Config) {
			c.Deployments[0].ExecutionPolicyOverrides = map[string]*configv1.OperationPolicy{"chess": {}}
		}, `deployments[0].executionPolicyOverrides["chess"]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &configv1.Config{Deployments: []*configv1.Deployment{goodDeployment()}}
			if err := v.Config(cfg); err != nil {
				t.Fatalf("base config invalid: %v", err)
			}
			tc.mut(cfg)
			err := v.Config(cfg)
			if err == nil {
				t.Fatal("accepted")
			}
			fields := fieldErrors(t, err)
			if _, ok := fields[tc.field]; !ok {
				t.Fatalf("error %q does not name %s (fields: %v)", err, tc.field, fields)
			}
		})
	}
}

func TestExecutionPoliciesMatrixIsExhaustive(t *testing.T) {
	v := validator(t)
	full := config.DefaultExecutionPolicies()
	if err := v.Config(&configv1.Config{RouterSettings: &configv1.RouterSettings{ExecutionPolicies: full}}); err != nil {
		t.Fatalf("the default matrix is rejected: %v", err)
	}
	missing := config.DefaultExecutionPolicies()
	delete(missing, "audio")
	err := v.Config(&configv1.Config{RouterSettings: &configv1.RouterSettings{ExecutionPolicies: missing}})
	if err == nil || !strings.Contains(err.Error(), `"audio"`) {
		t.Fatalf("a matrix without audio: %v, want a rejection naming audio", err)
	}
	noStream := config.DefaultExecutionPolicies()
	noStream["text"].Stream = nil
	if err := v.Config(&configv1.Config{RouterSettings: &configv1.RouterSettings{ExecutionPolicies: noStream}}); err == nil {
		t.Fatal("a matrix without text.stream was accepted")
	}
	extraMode := config.DefaultExecutionPolicies()
	extraMode["embeddings"].Stream = extraMode["embeddings"].Json
	if err := v.Config(&configv1.Config{RouterSettings: &configv1.RouterSettings{ExecutionPolicies: extraMode}}); err == nil {
		t.Fatal("an embeddings stream policy was accepted")
	}
	unknown := config.DefaultExecutionPolicies()
	unknown["telepathy"] = unknown["text"]
	if err := v.Config(&configv1.Config{RouterSettings: &configv1.RouterSettings{ExecutionPolicies: unknown}}); err == nil {
		t.Fatal("an unknown operation was accepted")
	}
	idleJSON := config.DefaultExecutionPolicies()
	idleJSON["text"].Json.IdleMs = proto.Uint64(1000)
	if err := v.Config(&configv1.Config{RouterSettings: &configv1.RouterSettings{ExecutionPolicies: idleJSON}}); err == nil {
		t.Fatal("idleMs on a JSON policy was accepted")
	}
	incomplete := config.DefaultExecutionPolicies()
	incomplete["text"].Json.MaxAttempts = nil
	fields := fieldErrors(t, v.Config(&configv1.Config{RouterSettings: &configv1.RouterSettings{ExecutionPolicies: incomplete}}))
	if _, ok := fields[`routerSettings.executionPolicies["text"].json.maxAttempts`]; !ok {
		t.Fatalf("missing maxAttempts not named: %v", fields)
	}
}

func TestOverridesMayOnlyLower(t *testing.T) {
	v := validator(t)
	d := goodDeployment()
	d.ExecutionPolicyOverrides = map[string]*configv1.OperationPolicy{
		"text": {Json: &configv1.ExecutionPolicy{ResponseMs: proto.Uint64(30_000), MaxAttempts: proto.Uint32(2)}, Stream: &configv1.ExecutionPolicy{IdleMs: proto.Uint64(10_000)}},
	}
	if err := v.Config(&configv1.Config{Deployments: []*configv1.Deployment{d}}); err != nil {
		t.Fatalf("lowering overrides rejected: %v", err)
	}
	d.ExecutionPolicyOverrides["text"].Json.ResponseMs = proto.Uint64(700_000) // global 600 s
	fields := fieldErrors(t, v.Config(&configv1.Config{Deployments: []*configv1.Deployment{d}}))
	if msg := fields[`deployments[0].executionPolicyOverrides["text"].json.responseMs`]; !strings.Contains(msg, "only lower") {
		t.Fatalf("raising responseMs: %v", fields)
	}
	d.ExecutionPolicyOverrides["text"].Json.ResponseMs = nil
	d.ExecutionPolicyOverrides["text"].Json.MaxAttempts = proto.Uint32(5)
	if err := v.Config(&configv1.Config{Deployments: []*configv1.Deployment{d}}); err == nil {
		t.Fatal("raising maxAttempts accepted")
	}
	// Lowering the global below an existing override makes the override a raise: rejected.
	d.ExecutionPolicyOverrides["text"].Json.MaxAttempts = proto.Uint32(2)
	m := config.DefaultExecutionPolicies()
	m["text"].Json.MaxAttempts = proto.Uint32(1)
	if err := v.Config(&configv1.Config{RouterSettings: &configv1.RouterSettings{ExecutionPolicies: m}, Deployments: []*configv1.Deployment{d}}); err == nil {
		t.Fatal("a global below an override was accepted")
	}
}

func TestMergeSettings(t *testing.T) {
	cur := &configv1.RouterSettings{RoutingStrategy: proto.String("least-busy"), AllowedFails: proto.Uint32(5), ExecutionPolicies: config.DefaultExecutionPolicies()}
	cur.ExecutionPolicies["text"].Stream.IdleMs = proto.Uint64(5000)
	patch := &configv1.RouterSettings{AllowedFails: proto.Uint32(0)}
	got := config.MergeSettings(cur, patch)
	if got.GetRoutingStrategy() != "least-busy" || got.AllowedFails == nil || got.GetAllowedFails() != 0 {
		t.Fatalf("merge: %v, want the strategy kept and allowedFails set to 0", got)
	}
	// A sent matrix replaces the old one whole: a cell without idleMs has no idleMs after.
	m := config.DefaultExecutionPolicies()
	m["text"].Stream.IdleMs = nil
	got = config.MergeSettings(got, &configv1.RouterSettings{ExecutionPolicies: m})
	if got.GetExecutionPolicies()["text"].GetStream().IdleMs != nil {
		t.Fatal("the matrix was merged cell by cell; idleMs survived")
	}
	if cur.GetAllowedFails() != 5 {
		t.Fatal("MergeSettings mutated its input")
	}
}

func TestEffectiveSettingsDefaults(t *testing.T) {
	eff := config.EffectiveSettings(nil)
	b, err := protojson.Marshal(eff)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"routingStrategy":"simple-shuffle"`, `"allowedFails":3`, `"cooldownSeconds":5`, `"retryAfterSeconds":0`, `"failureWindowSeconds":60`,
		`"maxCooldownSeconds":300`, `"halfOpenProbeSeconds":30`, `"configurationCooldownSeconds":300`, `"throttleCooldownSeconds":5`, `"whenAllOpen":"reject"`} {
		if !strings.Contains(strings.ReplaceAll(string(b), " ", ""), want) {
			t.Errorf("effective settings JSON lacks %s: %s", want, b)
		}
	}
	snap, err := config.Compile(1, &configv1.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := snap.Settings
	for _, tc := range []struct {
		op      config.Operation
		mode    config.Mode
		want    config.Policy
		cellStr string
	}{
		{config.OpText, config.ModeStream, config.Policy{Response: 600 * time.Second, Idle: 600 * time.Second, Total: 3600 * time.Second, MaxAttempts: 3}, "text stream"},
		{config.OpText, config.ModeJSON, config.Policy{Response: 600 * time.Second, Total: 1800 * time.Second, MaxAttempts: 3}, "text json"},
		{config.OpImages, config.ModeStream, config.Policy{Response: 600 * time.Second, Idle: 300 * time.Second, Total: 1800 * time.Second, MaxAttempts: 2}, "images stream"},
		{config.OpAudio, config.ModeJSON, config.Policy{Response: 900 * time.Second, Total: 1800 * time.Second, MaxAttempts: 2}, "audio json"},
		{config.OpAudio, config.ModeStream, config.Policy{Response: 600 * time.Second, Idle: 300 * time.Second, Total: 1800 * time.Second, MaxAttempts: 2}, "audio stream"},
		{config.OpEmbeddings, config.ModeJSON, config.Policy{Response: 120 * time.Second, Total: 300 * time.Second, MaxAttempts: 3}, "embeddings"},
		{config.OpRerank, config.ModeJSON, config.Policy{Response: 120 * time.Second, Total: 300 * time.Second, MaxAttempts: 3}, "rerank"},
		{config.OpVideo, config.ModeJSON, config.Policy{Response: 120 * time.Second, Total: 300 * time.Second, MaxAttempts: 2}, "video"},
		{config.OpVideoDownload, config.ModeStream, config.Policy{Response: 120 * time.Second, Idle: 120 * time.Second, Total: 900 * time.Second, MaxAttempts: 2}, "video download"},
	} {
		if got := s.Policy(tc.op, tc.mode); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.cellStr, got, tc.want)
		}
	}
	if s.Circuit.AllowedFails != 3 || s.Circuit.Cooldown != 5*time.Second || s.Circuit.HalfOpenProbe != 30*time.Second || s.WhenAllOpen != config.WhenAllOpenReject {
		t.Fatalf("compiled circuit defaults: %+v", s.Circuit)
	}
}

func TestParseRejectsUnknownFields(t *testing.T) {
	_, err := config.ParseJSON([]byte(`{"routerSettings":{"allowedFail":3}}`))
	if err == nil || !strings.Contains(err.Error(), "allowedFail") {
		t.Fatalf("a misspelt field: %v, want an error naming it", err)
	}
	cfg, err := config.ParseJSON([]byte(`{"deployments":[{"id":"a","publicModel":"m","provider":"azure-openai","baseUrl":"https://x.openai.azure.com","providerModel":"dep","apiVersion":"2024-10-21","weight":0}]}`))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := config.Compile(7, cfg, map[string]string{"a": "k"})
	if err != nil {
		t.Fatal(err)
	}
	d := snap.Deployments["a"]
	if d.Weight != 0 || !d.Enabled || d.APIKey != "k" || d.Domain != "deployment/a" || snap.Groups["m"].Deployments[0] != d {
		t.Fatalf("compiled deployment: %+v", d)
	}
}

// A router-settings patch is checked alone and merged into the settings in force, which stay
// as they were (the whole configuration is checked by the admin API's write: admin's
// TestRouterSettings).
func TestPatchSettings(t *testing.T) {
	v := validator(t)
	current := &configv1.RouterSettings{RoutingStrategy: proto.String("least-busy")}
	got, err := v.PatchSettings(current, &configv1.RouterSettings{AllowedFails: proto.Uint32(7)})
	if err != nil || got.GetRoutingStrategy() != "least-busy" || got.GetAllowedFails() != 7 {
		t.Fatalf("valid patch: %v %v, want the strategy kept and allowedFails 7", got, err)
	}
	if current.AllowedFails != nil {
		t.Fatal("PatchSettings changed the settings in force")
	}
	_, err = v.PatchSettings(current, &configv1.RouterSettings{RoutingStrategy: proto.String("round-robin")})
	if fields := fieldErrors(t, err); fields["routingStrategy"] == "" {
		t.Fatalf("invalid patch: %v, want routingStrategy named as in the request body", fields)
	}
}
