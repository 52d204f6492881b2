package xds

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/routing/config"
)

// Every Envoy configuration shipped in envoy/ loads into the Bootstrap proto, passes
// ValidateAll and runs in envoysim; the ADS bootstrap gets switchyard's clusters and route
// from this package's server, the static template (rendered with sample values) has its
// deployment clusters.
func TestShippedBootstraps(t *testing.T) {
	files, err := filepath.Glob("../envoy/*.yaml*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no envoy/*.yaml: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			var data []byte
			if strings.HasSuffix(path, ".tmpl") {
				data = renderStaticTemplate(t, path)
			} else {
				data = mustRead(t, path)
			}
			bs, err := sim.Load(data)
			if err != nil {
				t.Fatal(err)
			}
			if err := bs.ValidateAll(); err != nil {
				t.Fatal(err)
			}
			// switchyard's own static clusters lift Envoy's circuit breakers as the xDS
			// deployment clusters do (docs/xds.md, "circuit_breakers").
			lifted := 0
			for _, c := range bs.GetStaticResources().GetClusters() {
				if n := c.GetName(); strings.HasPrefix(n, "switchyard_extproc") || strings.HasPrefix(n, contract.ClusterName("")) {
					lifted++
					if !proto.Equal(c.GetCircuitBreakers(), liftedCircuitBreakers()) {
						t.Errorf("cluster %s: circuit_breakers %v, want %v", n, c.GetCircuitBreakers(), liftedCircuitBreakers())
					}
				}
			}
			if lifted == 0 {
				t.Error("no switchyard_extproc or deployment cluster")
			}
			if a := bs.GetAdmin().GetAddress().GetSocketAddress(); a != nil {
				a.PortSpecifier = &corev3.SocketAddress_PortValue{}
			}
			opts := []sim.Option{sim.WithListenerAddress("ingress", "127.0.0.1:0")}
			dynamic := bs.GetDynamicResources().GetAdsConfig() != nil
			if dynamic {
				live := config.NewLive(compile(t, 1, dep("a", "openai", "https://api.openai.com/v1")))
				// A TLS cluster: envoysim reads the CA bundle when it accepts the cluster.
				ts := httptest.NewTLSServer(http.NotFoundHandler())
				defer ts.Close()
				f := startServer(t, live, Options{Trampoline: "127.0.0.1:9003", UpstreamCAFile: writeCA(t, ts)}, nil)
				opts = append(opts, sim.WithClusterAddress("switchyard_xds", f.addr))
			}
			s, err := sim.New(bs, opts...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			if err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.Addr("ingress") == "" {
				t.Fatal("no ingress listener")
			}
			if err := s.WaitForClusters(ctx, "switchyard_extproc", "sy-dep-a"); err != nil {
				t.Fatal(err)
			}
			if dynamic {
				if err := s.WaitForRouteConfigs(ctx, DefaultRouteConfigName); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// renderStaticTemplate fills envoy/static-clusters.yaml.tmpl as e2e/gateway does.
func renderStaticTemplate(t *testing.T, path string) []byte {
	t.Helper()
	type endpoint struct {
		ID, Host string
		Port     int
	}
	tmpl, err := template.ParseFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = tmpl.Execute(&out, map[string]any{
		"ListenPort":     0,
		"MaxRedirects":   contract.DefaultMaxRedirects,
		"ConnectTimeout": "1s",
		"ExtProc":        endpoint{Host: "127.0.0.1", Port: 9002},
		"AttemptExtProc": endpoint{Host: "127.0.0.1", Port: 9002},
		"AttemptCluster": DefaultExtProcCluster + "_attempt", // renders the second ext_proc cluster too
		"Trampoline":     endpoint{Host: "127.0.0.1", Port: 9003},
		"Deployments":    []endpoint{{ID: "a", Host: "127.0.0.1", Port: 18081}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStaticTemplateRemovesProviderHeaders: the static template's route removes the same
// provider headers as the route switchyard publishes over xDS.
func TestStaticTemplateRemovesProviderHeaders(t *testing.T) {
	bs, err := sim.Load(renderStaticTemplate(t, "../envoy/static-clusters.yaml.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range bs.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				hcm := &hcmv3.HttpConnectionManager{}
				if err := f.GetTypedConfig().UnmarshalTo(hcm); err != nil {
					t.Fatal(err)
				}
				for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
					for _, r := range vh.GetRoutes() {
						got = append(got, r.GetResponseHeadersToRemove()...)
					}
				}
			}
		}
	}
	if !slices.Equal(got, contract.ProviderResponseHeaders()) {
		t.Fatalf("static template removes %v,\nwant contract.ProviderResponseHeaders() %v", got, contract.ProviderResponseHeaders())
	}
	if pub := buildRoute(Options{}).GetVirtualHosts()[0].GetRoutes()[0].GetResponseHeadersToRemove(); !slices.Equal(pub, contract.ProviderResponseHeaders()) {
		t.Fatalf("published route removes %v", pub)
	}
}
