package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/switchyard-gw/switchyard/admin"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
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
	// No master key configured: the authenticated endpoint refuses, never opens.
	resp2, err := http.Get(srv.URL + "/v1/models/m/deployments")
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a master key: %d, want 401", resp2.StatusCode)
	}
}
