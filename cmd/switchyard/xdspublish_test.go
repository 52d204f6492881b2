package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim"
	"github.com/switchyard-gw/switchyard/internal/redistest"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

// Issue 16 item 2: a deployment whose base URL cannot become a cluster, written straight
// into the store (past the admin API's validation), is left out of the xDS snapshot, shown
// in /readyz, /metrics and the status view; a later good deployment added through the admin
// API still reaches an Envoy over ADS.
func TestBadStoredDeploymentDoesNotFreezeXDS(t *testing.T) {
	addr, prefix := redisServer.Addr(t), redistest.Prefix(t)
	in := start(t, "-config", writeConfig(t, "a"), "-store", "redis", "-redis-addrs", addr, "-redis-prefix", prefix)
	envoy := xdsEnvoy(t, in.xds)
	waitClusters(t, envoy, "sy-dep-a")

	st, err := redisstore.New(redisstore.NewClient(&redis.UniversalOptions{Addrs: []string{addr}}), redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	snap, err := st.LoadConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cfg := snap.Config
	cfg.Deployments = append(cfg.Deployments, &configv1.Deployment{Id: "bad", PublicModel: "m", Provider: "openai",
		BaseUrl: "ftp://ops:hunter2@files.internal", ProviderModel: "m"})
	if _, err := st.ReplaceConfig(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the replica follows the stored version", func() bool {
		return in.live.Load().Deployments["bad"] != nil
	})

	code, etag, body := adminCall(t, in, "POST", "/admin/deployments",
		`{"id":"b","publicModel":"m","provider":"openai","baseUrl":"https://api.example.com","providerModel":"m"}`)
	if code != http.StatusCreated {
		t.Fatalf("adding b next to the stored bad deployment: %d %s %s", code, etag, body)
	}
	waitClusters(t, envoy, "sy-dep-a", "sy-dep-b")
	if hasSimCluster(envoy, "sy-dep-bad") {
		t.Fatal("the bad deployment has a cluster")
	}
	eventually(t, 10*time.Second, "the omission counted", func() bool {
		return metric(t, in, "switchyard_xds_omitted_deployments") == 1
	})
	if n := metric(t, in, "switchyard_xds_deployment_omissions_total"); n != 1 {
		t.Errorf("omissions %v, want 1: counted once, not again for version of b", n)
	}
	code, ready := in.get(t, "/readyz", "")
	detail := jsonString(ready["checks"])
	if code != http.StatusOK || !strings.Contains(detail, `"name":"xds"`) || !strings.Contains(detail, "left out of the snapshot") ||
		!strings.Contains(detail, "bad (") || !strings.Contains(detail, `"degraded":true`) {
		t.Fatalf("/readyz = %d %v, want ready with xds degraded naming bad", code, ready)
	}
	code, status := in.get(t, "/v1/models/m/deployments", "test-master-key")
	marked := false
	for _, d := range status["data"].([]any) {
		m := d.(map[string]any)
		if np, _ := m["not_published"].(string); np != "" {
			marked = m["id"] == "bad" && strings.Contains(np, "scheme")
		}
	}
	if code != http.StatusOK || !marked {
		t.Fatalf("status view %d %v, want only bad marked not_published", code, status)
	}
	if logs := in.logs.String(); strings.Contains(logs, "hunter2") || strings.Contains(jsonString(status), "hunter2") || strings.Contains(detail, "hunter2") {
		t.Fatal("the bad URL's credential was repeated")
	}
	if n := strings.Count(in.logs.String(), "deployment left out of the snapshot"); n != 1 {
		t.Errorf("%d log lines for the omission, want 1", n)
	}
}

// xdsEnvoy runs envoysim on the shipped bootstrap, its ADS cluster pointed at xdsAddr.
func xdsEnvoy(t *testing.T, xdsAddr string) *sim.Sim {
	t.Helper()
	bs, err := sim.LoadFile("../../envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bs.GetAdmin().GetAddress().GetSocketAddress().PortSpecifier = &corev3.SocketAddress_PortValue{}
	s, err := sim.New(bs, sim.WithListenerAddress("ingress", "127.0.0.1:0"),
		sim.WithClusterAddress("switchyard_xds", xdsAddr), sim.WithClusterAddress("switchyard_extproc", "127.0.0.1:1"),
		sim.WithADSInitialBackoff(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); s.Close() })
	return s
}

func waitClusters(t *testing.T, s *sim.Sim, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.WaitForClusters(ctx, names...); err != nil {
		t.Fatal(err)
	}
}

func hasSimCluster(s *sim.Sim, name string) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return s.WaitForClusters(ctx, name) == nil
}
