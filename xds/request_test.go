package xds_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/internal/replica"
	"github.com/switchyard-gw/switchyard/internal/testnet"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
	"github.com/switchyard-gw/switchyard/xds"
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
	caFile := xds.WriteCA(t, ts)
	dead := testnet.DeadAddress(t)

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

	// switchyard as the binary assembles it: the ext_proc roles, the trampoline and ADS.
	key := make([]byte, attemptstate.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	xdsLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	r, err := replica.New(replica.Config{Router: routing.New(live, memstore.New(), routing.Options{Logger: log}), Live: live,
		Keys: attemptstate.Keys{Current: key}, Logger: log, Listeners: replica.Listeners{XDS: xdsLn},
		XDS: xds.Options{UpstreamCAFile: caFile}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.Serve(ctx, make(chan error, 3))
	t.Cleanup(func() { cancel(); r.Shutdown(ctx) })

	envoy := xds.StartEnvoy(t, r.XDSAddr(), r.ExtProcAddr())
	xds.WaitFor(t, envoy, "sy-dep-a", "sy-dep-b")

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
