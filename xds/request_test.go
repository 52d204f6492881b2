package xds

import (
	"bytes"
	"crypto/rand"
	"encoding/pem"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/extproc"
	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
)

// A request through envoysim on the shipped bootstrap, with nothing but xDS-published
// clusters and route: the cheaper deployment "a" refuses connections (an https base URL,
// so the retry to the trampoline must go out in plaintext through transport_socket_matches),
// the trampoline's 307 fails over, and "b", a fake OpenAI behind TLS, answers after Envoy
// verified its certificate against UpstreamCAFile.
func TestRequestThroughPublishedClusters(t *testing.T) {
	fake, err := fakeprovider.New(fakeprovider.Options{Kind: fakeprovider.OpenAI, Name: "b", APIKey: "sk-b"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewTLSServer(fake)
	t.Cleanup(func() { fake.Close(); ts.Close() })
	caFile := writeCA(t, ts)
	dead := deadAddress(t)

	price := func(p float64) *configv1.Price { return &configv1.Price{InputPerMillion: &p, OutputPerMillion: &p} }
	strategy := "price-based"
	cfg := &configv1.Config{
		RouterSettings: &configv1.RouterSettings{RoutingStrategy: &strategy},
		Deployments: []*configv1.Deployment{
			{Id: "a", PublicModel: "gpt-4o", Provider: "openai", BaseUrl: "https://" + dead + "/v1", ProviderModel: "gpt-4o", Price: price(1)},
			{Id: "b", PublicModel: "gpt-4o", Provider: "openai", BaseUrl: ts.URL + "/v1", ProviderModel: "gpt-4o", Price: price(2)},
		},
	}
	val, err := config.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	if err := val.Config(cfg); err != nil {
		t.Fatal(err)
	}
	snap, err := config.Compile(1, cfg, map[string]string{"a": "sk-a", "b": "sk-b"})
	if err != nil {
		t.Fatal(err)
	}
	live := config.NewLive(snap)

	// switchyard's data plane: the ext_proc roles and the trampoline.
	key := make([]byte, attemptstate.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	sealer, err := attemptstate.NewSealer(attemptstate.Keys{Current: key}, attemptstate.SealerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	ep := extproc.NewServer(routing.New(live, memstore.New(), routing.Options{Logger: log}), sealer,
		extproc.Options{Logger: log, Metrics: extproc.NewMetrics(prometheus.NewRegistry())})
	gs := grpc.NewServer()
	ep.Register(gs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	tramp := httptest.NewServer(ep.Trampoline())
	t.Cleanup(tramp.Close)

	f := startServer(t, live, Options{Trampoline: tramp.Listener.Addr().String(), UpstreamCAFile: caFile}, nil)
	envoy := startEnvoy(t, f.addr, ln.Addr().String())
	waitFor(t, envoy, "sy-dep-a", "sy-dep-b")

	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	req, err := http.NewRequest("POST", "http://"+envoy.Addr("ingress")+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-client")
	// A 307 must never reach the client: do not follow one.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	got, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !bytes.Contains(got, []byte(`"choices"`)) {
		t.Fatalf("status %d: %s", res.StatusCode, got)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "Bearer sk-b" {
		t.Fatalf("b saw %d requests (%v)", len(reqs), reqs)
	}
}

// deadAddress is a loopback address where nothing listens.
func deadAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// writeCA writes ts's certificate as a CA bundle for Options.UpstreamCAFile.
func writeCA(t *testing.T, ts *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
