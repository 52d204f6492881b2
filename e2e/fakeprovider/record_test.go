package fakeprovider

import (
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestRecording: every field a test needs to assert the gateway's rewrites is recorded,
// including the applied fault and the answered status; Reset clears records and restarts
// the id sequence.
func TestRecording(t *testing.T) {
	s, base := start(t, Options{Kind: Azure, APIKey: azureKey})
	before := time.Now()
	res := post(t, nil, base+"/openai/deployments/dep-a/chat/completions?api-version=2024-10-21&extra=1",
		`{"model":"whatever","stream":true,"messages":[]}`,
		map[string]string{"api-key": azureKey, "x-gateway-attempt": "2", FaultHeader: "error=rate_limit; retry-after=1"})
	res.Body.Close()

	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests recorded", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodPost || r.Path != "/openai/deployments/dep-a/chat/completions" ||
		r.Query.Get("api-version") != "2024-10-21" || r.Query.Get("extra") != "1" ||
		r.Header.Get("x-gateway-attempt") != "2" || r.Get("model").String() != "whatever" ||
		r.Model != "dep-a" || !r.Stream || r.Status != 429 || r.Time.Before(before) {
		t.Errorf("recorded %+v", r)
	}
	if r.Fault == nil || r.Fault.Error != RateLimited || r.Fault.RetryAfter != "1" {
		t.Errorf("fault %+v", r.Fault)
	}
	// Copies are independent of the recorder.
	r.Header.Set("x-gateway-attempt", "mutated")
	r.Body[0] = 'X'
	if again, _ := s.LastRequest(); again.Header.Get("x-gateway-attempt") != "2" || again.Body[0] != '{' {
		t.Error("Requests returned shared state")
	}

	s.Reset()
	if len(s.Requests()) != 0 {
		t.Fatal("Reset kept records")
	}
	res = post(t, nil, base+"/openai/deployments/dep-a/chat/completions?api-version=2024-10-21", `{"messages":[]}`, map[string]string{"api-key": azureKey})
	res.Body.Close()
	if got := res.Header.Get("apim-request-id"); got != "00000000-0000-4000-8000-000000000001" {
		t.Errorf("id sequence not restarted: %s", got)
	}
}

// TestConcurrentScript: under concurrent requests a scripted fault is consumed exactly
// Times times, and every request is recorded (run with -race).
func TestConcurrentScript(t *testing.T) {
	s, base := start(t, Options{Kind: OpenAI})
	s.Script(Fault{Error: ServerError, Times: 5})
	const n = 20
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			res := post(t, nil, base+"/v1/chat/completions", `{"model":"m","messages":[]}`, nil)
			res.Body.Close()
			statuses <- res.StatusCode
		})
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for st := range statuses {
		count[st]++
	}
	if count[500] != 5 || count[200] != 15 || s.Pending() != 0 || len(s.Requests()) != n {
		t.Errorf("statuses %v pending %d recorded %d", count, s.Pending(), len(s.Requests()))
	}
}

// TestScriptFilters: faults match on path suffix and model, queue in order, Always
// repeats, and a request rejected at admission (bad key) does not consume a fault.
func TestScriptFilters(t *testing.T) {
	s, base := start(t, Options{Kind: OpenAI, APIKey: openAIKey})
	auth := map[string]string{"Authorization": "Bearer " + openAIKey}
	s.Script(
		Fault{Model: "model-b", Error: RateLimited},
		Fault{Path: "/embeddings", Error: ServerError, Times: Always},
	)
	call := func(path, model string, hdr map[string]string) int {
		res := post(t, nil, base+path, `{"model":"`+model+`","input":"x","messages":[]}`, hdr)
		res.Body.Close()
		return res.StatusCode
	}
	steps := []struct {
		path, model string
		hdr         map[string]string
		want        int
	}{
		{"/v1/chat/completions", "model-b", nil, 401}, // rejected: fault stays queued
		{"/v1/chat/completions", "model-a", auth, 200},
		{"/v1/embeddings", "emb", auth, 500},
		{"/v1/chat/completions", "model-b", auth, 429},
		{"/v1/chat/completions", "model-b", auth, 200},
		{"/v1/embeddings", "emb", auth, 500},
	}
	for i, st := range steps {
		if got := call(st.path, st.model, st.hdr); got != st.want {
			t.Errorf("step %d %s %s: status %d, want %d", i, st.path, st.model, got, st.want)
		}
	}
	if s.Pending() != 1 {
		t.Errorf("pending %d, want the Always fault", s.Pending())
	}
}
