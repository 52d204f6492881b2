package realenvoy_test

import (
	"strings"
	"testing"

	"github.com/testcontainers/testcontainers-go"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
)

const fullText = "Hello from the fake provider."

func chatBody(model string, stream bool) string {
	if stream {
		return `{"model":"` + model + `","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	}
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
}

// The same scenarios on envoysim, so the suite's harness and assertions run everywhere.
func TestScenariosOnEnvoysim(t *testing.T) { runScenarios(t, envoySim{}) }

func runScenarios(t *testing.T, px proxy) {
	f := startFixture(t, px, []deployment{
		{ID: "a", Model: "gpt-4o", Price: 1},
		{ID: "b", Model: "gpt-4o", Price: 2},
		{ID: "down", Model: "gpt-4o-mini", Price: 1, Down: true},
		{ID: "up", Model: "gpt-4o-mini", Price: 2},
	})

	t.Run("success", func(t *testing.T) {
		f.reset()
		code, body := f.post(t, chatBody("gpt-4o", false), nil)
		if code != 200 || !strings.Contains(body, fullText) {
			t.Fatalf("%d %s", code, body)
		}
		if got := f.served(); got["a"] != 1 || len(got) != 1 {
			t.Errorf("served %v, want a once", got)
		}
		r, _ := f.fakes["a"].LastRequest()
		if auth := r.Header.Get("Authorization"); auth != "Bearer "+providerKey("a") {
			t.Errorf("provider saw Authorization %q", auth)
		}
	})

	t.Run("5xx fails over through an internal redirect", func(t *testing.T) {
		f.reset()
		code, body := f.post(t, chatBody("gpt-4o", false), map[string]string{fakeprovider.FaultHeader: "server=a; status=500"})
		if code != 200 || !strings.Contains(body, fullText) {
			t.Fatalf("%d %s", code, body)
		}
		if got := f.served(); got["a"] != 1 || got["b"] != 1 {
			t.Errorf("served %v, want one attempt on each", got)
		}
		r, _ := f.fakes["b"].LastRequest()
		if r.Header.Get("x-switchyard-state") != "" {
			t.Error("the provider saw the attempt state")
		}
	})

	t.Run("connection refused goes through the trampoline", func(t *testing.T) {
		f.reset()
		code, body := f.post(t, chatBody("gpt-4o-mini", false), nil)
		if code != 200 || !strings.Contains(body, fullText) {
			t.Fatalf("%d %s", code, body)
		}
		if got := f.served(); got["up"] != 1 {
			t.Errorf("served %v, want up once", got)
		}
		if !strings.Contains(f.logs.String(), `"via":"trampoline"`) {
			t.Error("the trampoline did not record the connect failure")
		}
	})

	t.Run("stream", func(t *testing.T) {
		f.reset()
		code, body := f.post(t, chatBody("gpt-4o", true), nil)
		if code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		var text strings.Builder
		for _, line := range strings.Split(body, "\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			if i := strings.Index(data, `"content":"`); i >= 0 {
				rest := data[i+len(`"content":"`):]
				text.WriteString(rest[:strings.IndexByte(rest, '"')])
			}
		}
		if text.String() != fullText || !strings.Contains(body, "data: [DONE]") || !strings.Contains(body, `"usage":{`) {
			t.Fatalf("streamed %q; body %s", text.String(), body)
		}
	})
}

// The bootstrap the container runs is the shipped one with switchyard's addresses, and
// stays valid; this part needs no Docker.
func TestContainerBootstrapIsTheShippedOne(t *testing.T) {
	b := proxyBootstrap(t, testcontainers.HostInternal, 19002, 19000)
	bs, err := loadJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range bs.GetStaticResources().GetClusters() {
		sa := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
		got[c.GetName()] = c.GetType().String() + " " + inContainerAddr(sa.GetAddress(), sa.GetPortValue())
	}
	want := map[string]string{
		"switchyard_extproc": "STRICT_DNS " + inContainer(19002),
		"switchyard_xds":     "STRICT_DNS " + inContainer(19000),
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("cluster %s = %q, want %q", k, got[k], v)
		}
	}
	hcm := bs.GetStaticResources().GetListeners()
	if len(hcm) != 1 || hcm[0].GetName() != "ingress" || hcm[0].GetAddress().GetSocketAddress().GetPortValue() != 10000 {
		t.Errorf("listeners %v, want the shipped ingress on 10000", hcm)
	}
}
