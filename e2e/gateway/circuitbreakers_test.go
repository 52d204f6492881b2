//go:build !race

// Not under -race: the race detector allows 8,128 live goroutines, and more than a thousand
// requests in flight through envoysim and switchyard take several times that.

package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
)

// More requests in flight at once than Envoy's default circuit breakers allow (1,024
// requests per cluster). Each holds an attempt-role stream on the ext_proc cluster and a
// request on its deployment cluster for its whole life; past the default the pool fails the
// next with Overflow, a 503 that is never failed over (docs/xds.md, "circuit_breakers").
// The provider holds every answer until all requests have reached it, so all are in flight
// together; with Envoy's defaults fewer than n ever arrive and the test fails.
func TestMoreRequestsInFlightThanEnvoysDefaultCircuitBreakers(t *testing.T) {
	forModes(t, testMoreRequestsInFlightThanEnvoysDefaultCircuitBreakers)
}

func testMoreRequestsInFlightThanEnvoysDefaultCircuitBreakers(t *testing.T, xdsMode bool) {
	const n = 1100
	fake, err := fakeprovider.New(fakeprovider.Options{Kind: fakeprovider.OpenAI, Name: "a", APIKey: providerKey("a")})
	if err != nil {
		t.Fatal(err)
	}
	var arrived atomic.Int64
	all := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) == n {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(wait / 2):
		case <-r.Context().Done():
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { fake.Close(); ts.Close() })
	g := startGateway(t, []deployment{{ID: "a", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI, URL: ts.URL}},
		gatewayOptions{xds: xdsMode})

	if failed, first := g.concurrentChats(t, n, "gpt-4o"); failed > 0 || arrived.Load() != n {
		t.Fatalf("%d of %d requests failed (first: %v); %d reached the provider", failed, n, first, arrived.Load())
	}
	eventually(t, "in-flight back to 0", func() bool { return g.inFlight("a") == 0 })
}
