package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-gw/switchyard/admin"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
)

func TestReadinessReflectsChecks(t *testing.T) {
	snap, err := config.Compile(1, &configv1.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := routing.New(config.NewLive(snap), memstore.New(), routing.Options{})
	degraded := admin.Readiness{Name: "store", Ready: false, Detail: "redis unreachable"}
	h := admin.Handler(r, admin.Options{Checks: []func(context.Context) admin.Readiness{
		func(context.Context) admin.Readiness { return degraded },
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Ready  bool              `json:"ready"`
		Checks []admin.Readiness `json:"checks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || body.Ready || len(body.Checks) != 2 || body.Checks[1].Detail != "redis unreachable" {
		t.Fatalf("/readyz = %d %+v, want 503 with the failing check's detail", resp.StatusCode, body)
	}
	// The operator listener shows no routing state: the status view is the admin API's.
	resp2, err := http.Get(srv.URL + "/v1/models/m/deployments")
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusNotFound {
		t.Fatalf("status view on the operator handler: %d, want 404", resp2.StatusCode)
	}
}

// behaviour §10.3 over HTTP: a deployment switched off by its kill switch is reported disabled,
// never available; each deployment shows its circuit and its attempts in flight.
func TestDeploymentStatusReportsDisabled(t *testing.T) {
	cfg := &configv1.Config{Deployments: []*configv1.Deployment{
		{Id: "on", PublicModel: "m", Provider: "openai", BaseUrl: "https://api.example.com", ProviderModel: "m"},
		{Id: "off", PublicModel: "m", Provider: "openai", BaseUrl: "https://api.example.com", ProviderModel: "m", Enabled: proto.Bool(false)},
	}}
	snap, err := config.Compile(1, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	r := routing.New(config.NewLive(snap), st, routing.Options{})
	v, err := config.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	api, err := admin.NewAPI(admin.APIOptions{MasterKey: "mk", Config: st, Validator: v, Router: r})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a1", "a2"} {
		if err := st.StartAttempt(context.Background(), store.AttemptStart{DeploymentID: "on", AttemptID: id, Now: time.Now(), Expires: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(api)
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/models/m/deployments", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer mk")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data []routing.DeploymentStatus `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || len(body.Data) != 2 {
		t.Fatalf("GET deployments: %d %+v, want 200 with both deployments", resp.StatusCode, body)
	}
	want := map[string]struct {
		state, circuit string
		inFlight       int64
	}{"on": {"available", "closed", 2}, "off": {"disabled", "disabled", 0}}
	for _, s := range body.Data {
		w := want[s.ID]
		if s.State != w.state || s.Circuit != w.circuit || s.InFlight != w.inFlight || s.Enabled != (s.ID == "on") {
			t.Errorf("%s reported %+v, want %+v", s.ID, s, w)
		}
	}
}

// The runtime profiles are served only when the operator asks for them (-operator-pprof).
func TestProfilingIsOptIn(t *testing.T) {
	for _, on := range []bool{false, true} {
		srv := httptest.NewServer(admin.Handler(nil, admin.Options{Profiling: on}))
		resp, err := http.Get(srv.URL + "/debug/pprof/goroutine?debug=1")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		srv.Close()
		if want := map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[on]; resp.StatusCode != want {
			t.Errorf("profiling %v: status %d, want %d", on, resp.StatusCode, want)
		}
	}
}
