package extproc_test

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/extproc"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

// A scrape whose read of the store fails leaves the deployment gauges out of that scrape
// (rather than report every circuit closed), counts the failure and logs it; /metrics still
// answers.
func TestDeploymentCollectorSurvivesAStoreFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close() // nothing listens there: every read fails at once
	st, err := redisstore.New(redisstore.NewClient(&redis.UniversalOptions{Addrs: []string{dead}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	snap, err := config.Compile(1, &configv1.Config{Deployments: []*configv1.Deployment{
		{Id: "d1", PublicModel: "m", Provider: "openai", BaseUrl: "https://api.example.com", ProviderModel: "m"},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	reg.MustRegister(extproc.NewDeploymentCollector(routing.New(config.NewLive(snap), st, routing.Options{}),
		slog.New(slog.NewTextHandler(&logs, nil))))
	for i := 1; i <= 2; i++ {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("gather: %v", err)
		}
		if len(mfs) != 1 || mfs[0].GetName() != "switchyard_deployment_state_read_errors_total" {
			t.Fatalf("scrape %d gathered %v; want only the read-error counter", i, mfs)
		}
		if got := mfs[0].GetMetric()[0].GetCounter().GetValue(); got != float64(i) {
			t.Fatalf("read errors after %d scrapes: %v", i, got)
		}
	}
	if !strings.Contains(logs.String(), "reading the deployments' state for /metrics failed") {
		t.Fatalf("no log line: %s", logs.String())
	}
}
