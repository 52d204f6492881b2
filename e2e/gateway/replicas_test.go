package gateway_test

import (
	"testing"

	"github.com/openai/openai-go/v3/option"
	"google.golang.org/protobuf/proto"

	"github.com/redis/go-redis/v9"
	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/internal/redistest"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

// TestTwoReplicasShareRedis: two switchyard replicas behind one envoysim share one Redis;
// the route role runs on one and the attempt role on the other, and trampoline connections
// alternate between them, so the state of one request crosses replicas at every step and
// what one replica learns steers the other.
func TestTwoReplicasShareRedis(t *testing.T) { forModes(t, testTwoReplicasShareRedis) }

func testTwoReplicasShareRedis(t *testing.T, xdsMode bool) {
	srv := redistest.Start(t)
	prefix := redistest.Prefix(t)
	var stores []store.Store
	for i := 0; i < 2; i++ {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		st, err := redisstore.New(c, redisstore.WithPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		stores = append(stores, st)
	}
	settings := priceBased()
	settings.AllowedFails = proto.Uint32(0)
	settings.CooldownSeconds = proto.Uint32(60)
	g := startGateway(t, twoDeployments(deployment{}), gatewayOptions{xds: xdsMode, settings: settings, store: stores[0], replicas: 2, replicaStores: stores})
	for i := 0; i < 4; i++ {
		c := g.openai()
		if i == 0 {
			c = g.openai(option.WithHeader(fakeprovider.FaultHeader, "server=a; status=500"))
		}
		if _, err := c.Chat.Completions.New(ctxT(t), chat("gpt-4o")); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	// a failed once and its circuit (allowedFails 0) is open for every replica.
	if got := g.served(); got["a"] != 1 || got["b"] != 4 {
		t.Errorf("served %v, want a once (then open everywhere) and b four times", got)
	}
	if !xdsMode {
		for i, r := range g.replicas {
			role := []string{"route", "attempt"}[i]
			if r.messages(role, "request_headers") == 0 {
				t.Errorf("replica %d served no %s stream", i, role)
			}
		}
	} else {
		// The shipped bootstrap has one ext_proc cluster, so both roles run on replica 0;
		// replica 1 serves xDS and follows Redis, and sees through its own client the
		// circuit replica 0 opened.
		if vs := g.versions(); vs[0] == 0 || vs[0] != vs[1] {
			t.Errorf("replica versions %v, want one version on both", vs)
		}
		if s := g.deploymentStatus(1, "gpt-4o", "a"); s.State != "cooldown" {
			t.Errorf("replica 1 sees a as %+v, want its circuit open", s)
		}
	}
	eventually(t, "in-flight back to 0", func() bool { return g.inFlight("a", "b") == 0 })
}
