package fakeprovider

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestRequestsEndpoint: GET /_fake/requests lists what the fake received — headers and
// body as sent — without auth and without being recorded itself; other methods get 405.
func TestRequestsEndpoint(t *testing.T) {
	_, base := start(t, Options{Kind: OpenAI, APIKey: "sk-test"})
	res := post(t, nil, base+"/v1/chat/completions", chatStreamBody, map[string]string{"Authorization": "Bearer sk-test", "X-Probe": "1"})
	readAll(t, res)
	res = post(t, nil, base+"/v1/chat/completions", `{"model":"gpt-4o"}`, map[string]string{"Authorization": "Bearer wrong"})
	readAll(t, res)

	for range 2 { // a second look shows the same two: the listing is not recorded
		res, err := http.Get(base + RequestsPath)
		if err != nil {
			t.Fatal(err)
		}
		var got []RequestView
		if err := json.NewDecoder(res.Body).Decode(&got); err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" || len(got) != 2 {
			t.Fatalf("GET %s: %d %v, %d requests", RequestsPath, res.StatusCode, res.Header, len(got))
		}
		a, b := got[0], got[1]
		if a.Method != "POST" || a.Path != "/v1/chat/completions" || a.Body != chatStreamBody || !a.Stream || a.Model != "gpt-4o-mini" ||
			a.Status != 200 || http.Header(a.Header).Get("Authorization") != "Bearer sk-test" || http.Header(a.Header).Get("X-Probe") != "1" || a.Time.IsZero() {
			t.Fatalf("first request %+v", a)
		}
		if b.Status != 401 || b.Body != `{"model":"gpt-4o"}` || http.Header(b.Header).Get("Authorization") != "Bearer wrong" {
			t.Fatalf("second request %+v", b)
		}
	}
	res = post(t, nil, base+RequestsPath, "{}", nil)
	readAll(t, res)
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET" {
		t.Fatalf("POST %s: %d, want 405", RequestsPath, res.StatusCode)
	}
}
