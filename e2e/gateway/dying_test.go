package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/internal/contract"
)

// What a client gets when the switchyard replica serving the attempt role dies in the middle
// of its request. Envoy ignores every local reply of an upstream ext_proc, its own error
// replies included, and has no fail-open once FULL_DUPLEX_STREAMED body chunks went to the
// processor; the attempt filter runs with failure_mode_allow: true. The bounds measured here
// are in docs/extproc.md.

// TestAttemptRoleDiesBeforeTheResponse: the provider is still thinking when the replica dies.
// Fail-open lets the provider's answer through unprocessed.
func TestAttemptRoleDiesBeforeTheResponse(t *testing.T) {
	g := startGateway(t, []deployment{{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI}}, gatewayOptions{})
	done := g.postAsync("/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{fakeprovider.FaultHeader: "header-delay=1s"})
	eventually(t, "the provider call", func() bool { return len(g.fakes["oa"].Requests()) == 1 })
	g.replicas[0].kill()
	r := awaitResult(t, done)
	if r.status != http.StatusOK || gjson.GetBytes(r.body, "choices.0.message.content").String() == "" {
		t.Fatalf("status %d body %s", r.status, r.body)
	}
	t.Logf("replica died before the response: client got %d after %v (provider latency 1 s)", r.status, r.took.Round(10*time.Millisecond))
	if r.took > 5*time.Second {
		t.Errorf("took %v", r.took)
	}
}

// TestAttemptRoleDiesDuringTheResponse: part of the JSON body already went to the attempt
// role when it dies. Envoy cannot fail open any more; the per-try timeout (the policy's
// responseMs) ends the attempt, the retry to the trampoline finds no attempt role either,
// and the client gets an error within about responseMs — never a hang until totalMs.
func TestAttemptRoleDiesDuringTheResponse(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,`))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	srv := newLoopbackServer(t, slow)
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	g := startGateway(t, []deployment{{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI, URL: srv, ResponseMs: 2000}}, gatewayOptions{})
	done := g.postAsync("/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, nil)
	eventually(t, "the first body chunk reaching the attempt role", func() bool {
		return g.replicas[0].messages(contract.RoleAttempt, "response_body") > 0
	})
	g.replicas[0].kill()
	r := awaitResult(t, done)
	t.Logf("replica died during the JSON response: client got %d after %v (responseMs 2 s)", r.status, r.took.Round(10*time.Millisecond))
	if r.status < 500 || r.took > 6*time.Second {
		t.Errorf("status %d after %v, want a 5xx within about responseMs", r.status, r.took)
	}
}

// result is a request made on another goroutine while the test stops a replica.
type result struct {
	status int
	header http.Header
	body   []byte
	took   time.Duration
	err    error
}

// postAsync posts on another goroutine, timing the request.
func (g *gateway) postAsync(path, body string, header map[string]string) <-chan result {
	done := make(chan result, 1)
	go func() {
		start := time.Now()
		resp, b, err := g.tryPost(path, body, header)
		r := result{body: b, err: err, took: time.Since(start)}
		if resp != nil {
			r.status, r.header = resp.StatusCode, resp.Header
		}
		done <- r
	}()
	return done
}

// awaitResult waits for the request, failing the test (never hanging it) when it erred or
// did not return.
func awaitResult(t *testing.T, done <-chan result) result {
	t.Helper()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r
	case <-time.After(wait):
		t.Fatal("the client did not return")
	}
	return result{}
}

func newLoopbackServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// messages counts the ext_proc messages of a role and kind the replica processed.
func (r *instance) messages(role, message string) uint64 {
	mfs, err := r.reg.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() != "switchyard_extproc_message_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ro, me string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "role":
					ro = l.GetValue()
				case "message":
					me = l.GetValue()
				}
			}
			if ro == role && me == message {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

// TestAttemptRoleDiesDuringACommittedStream: the first content chunk reached the client when
// the replica serving the attempt role dies, the provider still streaming. Envoy marks
// processing complete on the gRPC error (Filter::onGrpcError; no fail-open once
// FULL_DUPLEX_STREAMED body chunks went out, and its own error reply is ignored upstream),
// re-injects the chunks the processor had not answered (clearAsyncState) and passes every
// later chunk on unprocessed (Filter::onData returns Continue once processing_complete_).
// So a provider that keeps streaming is delivered in full, unprocessed; one that goes
// silent is ended by the HCM's stream_idle_timeout, which resets the client's stream and
// the SDK raises an error — never a clean end of a truncated answer.
func TestAttemptRoleDiesDuringACommittedStream(t *testing.T) {
	const idle = 2 * time.Second
	for _, tc := range []struct {
		name, fault string
		// complete: the client gets the whole answer without error; else an error
		// after about stream_idle_timeout.
		complete bool
		bound    time.Duration
	}{
		{"provider keeps streaming", "stall=1s; stall-after=2", true, time.Second + 2*time.Second},
		{"provider goes silent", "stall=30s; stall-after=2", false, idle + 2*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, []deployment{{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI}},
				gatewayOptions{streamIdleTimeout: idle.String()})
			s := g.openai(option.WithHeader(fakeprovider.FaultHeader, tc.fault)).Chat.Completions.NewStreaming(ctxT(t), chat("gpt-4o"))
			var text strings.Builder
			var stopped time.Time
			for s.Next() {
				for _, c := range s.Current().Choices {
					text.WriteString(c.Delta.Content)
				}
				if text.Len() > 0 && stopped.IsZero() {
					g.replicas[0].kill()
					stopped = time.Now()
				}
			}
			err := s.Err()
			took := time.Since(stopped)
			if stopped.IsZero() {
				t.Fatalf("no content before the end: err %v", err)
			}
			t.Logf("attempt role died after commit: client got %q, err %v, %v after the death (stream_idle_timeout %v)",
				text.String(), err, took.Round(10*time.Millisecond), idle)
			switch {
			case tc.complete && (err != nil || text.String() != fullText):
				t.Errorf("got %q err %v, want the whole answer", text.String(), err)
			case !tc.complete && err == nil:
				t.Errorf("a stream cut by switchyard's death ended cleanly with %q", text.String())
			}
			if took > tc.bound {
				t.Errorf("the client waited %v, want at most %v", took, tc.bound)
			}
			// The dying stream's context ends and releases the attempt's in-flight entry.
			eventually(t, "in-flight back to 0", func() bool { return g.inFlight("oa") == 0 })
		})
	}
}
