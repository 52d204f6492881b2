package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"
	"github.com/tidwall/gjson"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/switchyard-gw/switchyard/admin"
	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/internal/redistest"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

// adminClient calls one replica's admin API over real HTTP.
type adminClient struct {
	t    *testing.T
	base string
}

func startAdmin(t *testing.T, g *gateway, i int, st store.Store) adminClient {
	t.Helper()
	v, err := config.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	h, err := admin.NewAPI(admin.APIOptions{MasterKey: "mk", Config: st, Validator: v, ClientKeys: st, Router: g.replicas[i].router})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return adminClient{t: t, base: ts.URL}
}

// call sends one admin request, checks its status and returns the body and the new
// configuration version (the ETag).
func (a adminClient) call(method, path, body string, want int) ([]byte, uint64) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer mk")
	req.Header.Set("Content-Type", "application/json")
	res, out := (&gateway{t: a.t}).do(req)
	if res.StatusCode != want {
		a.t.Fatalf("%s %s: status %d, want %d: %s", method, path, res.StatusCode, want, out)
	}
	v, err := strconv.ParseUint(strings.Trim(strings.TrimPrefix(res.Header.Get("ETag"), "W/"), `"`), 10, 64)
	if err != nil {
		a.t.Fatalf("%s %s: ETag %q: %v", method, path, res.Header.Get("ETag"), err)
	}
	return out, v
}

// servedN sends n chats for model through envoysim and returns how many each fake took.
func (g *gateway) servedN(t *testing.T, model string, n int) map[string]int {
	t.Helper()
	before := g.served()
	for i := 0; i < n; i++ {
		if _, err := g.openai().Chat.Completions.New(ctxT(t), chat(model)); err != nil {
			t.Fatalf("request %d for %s: %v", i, model, err)
		}
	}
	out := map[string]int{}
	for id, k := range g.served() {
		if d := k - before[id]; d > 0 {
			out[id] = d
		}
	}
	return out
}

// TestAdminChangesReachEnvoyAndEveryReplica: two replicas share a real Redis behind one
// envoysim that gets its clusters and route over ADS from replica 0; every change goes
// through replica 1's admin API and must reach replica 0, its xDS and so envoysim, without a
// restart.
func TestAdminChangesReachEnvoyAndEveryReplica(t *testing.T) {
	srv := redistest.Start(t)
	prefix := redistest.Prefix(t)
	var stores []store.Store
	for i := 0; i < 2; i++ {
		st, err := redisstore.New(redis.NewClient(&redis.Options{Addr: srv.Addr()}), redisstore.WithPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		stores = append(stores, st)
	}
	shuffle := "simple-shuffle"
	deps := []deployment{
		{ID: "a", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI},
		{ID: "b", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI},
		{ID: "x", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI},
	}
	g := startGateway(t, deps, gatewayOptions{xds: true, settings: &configv1.RouterSettings{RoutingStrategy: &shuffle},
		store: stores[0], replicas: 2, replicaStores: stores})
	api1, api0 := startAdmin(t, g, 1, stores[1]), startAdmin(t, g, 0, stores[0])

	// (a) A new deployment of a new model: its cluster reaches envoysim and it serves.
	fake, err := fakeprovider.New(fakeprovider.Options{Kind: fakeprovider.OpenAI, Name: "c", APIKey: providerKey("c")})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(fake)
	t.Cleanup(func() { fake.Close(); ts.Close() })
	if hasCluster(g, contract.ClusterName("c")) {
		t.Fatal("envoysim has c's cluster before c exists")
	}
	_, v := api1.call(http.MethodPost, "/admin/deployments", `{"id":"c","publicModel":"gpt-4o-mini","provider":"openai",`+
		`"baseUrl":"`+ts.URL+`","providerModel":"gpt-4o-mini","apiKey":"`+providerKey("c")+`"}`, http.StatusCreated)
	g.waitForVersion(v)
	g.waitForXDS(contract.ClusterName("c"))
	if _, err := g.openai().Chat.Completions.New(ctxT(t), chat("gpt-4o-mini")); err != nil {
		t.Fatalf("a request for the new model: %v", err)
	}
	if r, ok := fake.LastRequest(); !ok || r.Model != "gpt-4o-mini" || r.Header.Get("Authorization") != "Bearer "+providerKey("c") {
		t.Fatalf("c's fake saw %d requests (last %+v)", len(fake.Requests()), r)
	}

	// (b) Weight 0 drains b under simple-shuffle: it takes no more traffic.
	cs, err := stores[1].LoadConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var b *configv1.Deployment
	for _, d := range cs.Config.GetDeployments() {
		if d.GetId() == "b" {
			b = d
		}
	}
	zero := uint32(0)
	b.Weight = &zero
	body, err := protojson.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	_, v = api1.call(http.MethodPut, "/admin/deployments/b", string(body), http.StatusOK)
	g.waitForVersion(v)
	if got := g.servedN(t, "gpt-4o", 20); got["b"] != 0 || got["a"]+got["x"] != 20 {
		t.Errorf("after weight 0 on b: served %v, want a and x only", got)
	}

	// (c) The kill switch: a disabled x takes no traffic either.
	_, v = api1.call(http.MethodPost, "/admin/deployments/x/disable", "", http.StatusOK)
	g.waitForVersion(v)
	if got := g.servedN(t, "gpt-4o", 10); got["a"] != 10 || len(got) != 1 {
		t.Errorf("after disabling x: served %v, want a only", got)
	}

	// (d) A new fallback chain: when a, the only gpt-4o deployment left, fails, the request
	// falls back to gpt-4o-mini (c).
	_, v = api1.call(http.MethodPost, "/admin/fallback-chains", `{"publicModel":"gpt-4o","reason":"general","targets":["gpt-4o-mini"]}`, http.StatusCreated)
	g.waitForVersion(v)
	cBefore, aBefore := len(fake.Requests()), g.served()["a"]
	res, err := g.openai(option.WithHeader(fakeprovider.FaultHeader, "server=a; status=500")).Chat.Completions.New(ctxT(t), chat("gpt-4o"))
	if err != nil {
		t.Fatalf("a request whose primary fails: %v", err)
	}
	if res.Choices[0].Message.Content == "" || len(fake.Requests()) != cBefore+1 || g.served()["a"] != aBefore+1 {
		t.Errorf("a served %d more, c %d more; want one each (a fails, the chain's c answers)",
			g.served()["a"]-aBefore, len(fake.Requests())-cBefore)
	}

	// (e) Router settings: replica 0 reflects the change made through replica 1.
	_, v = api1.call(http.MethodPut, "/admin/router-settings", `{"routingStrategy":"price-based"}`, http.StatusOK)
	g.waitForVersion(v)
	got, gv := api0.call(http.MethodGet, "/admin/router-settings", "", http.StatusOK)
	if s := gjson.GetBytes(got, "routingStrategy").String(); s != "price-based" || gv != v {
		t.Errorf("replica 0 GET router-settings at version %d: routingStrategy %q (%s), want price-based at %d", gv, s, got, v)
	}
	if s := g.replicas[0].live.Load().Settings.Strategy; s != config.StrategyPrice {
		t.Errorf("replica 0's strategy in force %v, want price-based", s)
	}
	g.assertClean()
}

// hasCluster reports whether envoysim has the cluster now.
func hasCluster(g *gateway, name string) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return g.sim.WaitForClusters(ctx, name) == nil
}
