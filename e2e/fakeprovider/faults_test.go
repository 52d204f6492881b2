package fakeprovider

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

const (
	chatStreamBody      = `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	responsesStreamBody = `{"model":"gpt-5","stream":true,"input":"hi"}`
	messagesStreamBody  = `{"model":"claude-sonnet-4-5","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
)

var anthropicHeaders = map[string]string{"anthropic-version": "2023-06-01"}

// TestTruncation: the clean-truncation faults the SDKs paper over. EndNoDone drops only the
// terminal marker; EndCut closes cleanly after N pieces with no finish reason, usage or
// terminal marker. Both end with a clean EOF, so only the missing marker tells.
func TestTruncation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kind  Kind
		path  string
		body  string
		fault Fault
		check func(t *testing.T, evs []rawEvent)
	}{
		{name: "chat_nodone", kind: OpenAI, path: "/v1/chat/completions", body: chatStreamBody, fault: Fault{End: EndNoDone},
			check: func(t *testing.T, evs []rawEvent) {
				d := dataOf(evs)
				if slices.Contains(d, "[DONE]") || !gjson.Get(d[len(d)-1], "usage.total_tokens").Exists() {
					t.Errorf("want usage chunk last and no [DONE]: %v", d)
				}
			}},
		{name: "chat_cut", kind: OpenAI, path: "/v1/chat/completions", body: chatStreamBody, fault: Fault{End: EndCut, EndAfter: 2},
			check: func(t *testing.T, evs []rawEvent) {
				d := dataOf(evs)
				if len(d) != 3 || strings.Contains(strings.Join(d, ""), `"finish_reason":"`) || slices.Contains(d, "[DONE]") {
					t.Errorf("want role chunk + 2 pieces and nothing else: %v", d)
				}
			}},
		{name: "messages_nodone", kind: Anthropic, path: "/v1/messages", body: messagesStreamBody, fault: Fault{End: EndNoDone},
			check: func(t *testing.T, evs []rawEvent) {
				n := namesOf(evs)
				if slices.Contains(n, "message_stop") || n[len(n)-1] != "message_delta" {
					t.Errorf("want message_delta last and no message_stop: %v", n)
				}
			}},
		{name: "messages_cut", kind: Anthropic, path: "/v1/messages", body: messagesStreamBody, fault: Fault{End: EndCut, EndAfter: 1},
			check: func(t *testing.T, evs []rawEvent) {
				want := []string{"message_start", "content_block_start", "ping", "content_block_delta"}
				if n := namesOf(evs); !slices.Equal(n, want) {
					t.Errorf("events %v, want %v", n, want)
				}
			}},
		{name: "responses_nodone", kind: OpenAI, path: "/v1/responses", body: responsesStreamBody, fault: Fault{End: EndNoDone},
			check: func(t *testing.T, evs []rawEvent) {
				n := namesOf(evs)
				if slices.Contains(n, "response.completed") || n[len(n)-1] != "response.output_item.done" {
					t.Errorf("want output_item.done last and no response.completed: %v", n)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, base := start(t, Options{Kind: tc.kind})
			s.Script(tc.fault)
			res := post(t, nil, base+tc.path, tc.body, anthropicHeaders)
			evs, err := readSSE(res, time.Now())
			if err != nil {
				t.Fatalf("clean truncation must end with EOF, got %v", err)
			}
			tc.check(t, evs)
		})
	}
}

// TestResetMidStream: EndReset sends two pieces, then a TCP RST; the client sees a 200 and
// then "connection reset by peer", over plain HTTP and TLS, for SSE and JSON bodies.
func TestResetMidStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  bool
		body string
	}{
		{name: "sse_http", body: chatStreamBody},
		{name: "sse_tls", tls: true, body: chatStreamBody},
		{name: "json_http", body: `{"model":"gpt-4o-mini","messages":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Options{Kind: OpenAI})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewUnstartedServer(s)
			if tc.tls {
				ts.StartTLS()
			} else {
				ts.Start()
			}
			t.Cleanup(func() { s.Close(); ts.Close() })
			res := post(t, ts.Client(), ts.URL+"/v1/chat/completions", tc.body, map[string]string{FaultHeader: "reset; after=2"})
			if res.StatusCode != 200 {
				t.Fatalf("status %d", res.StatusCode)
			}
			_, err = io.ReadAll(res.Body)
			res.Body.Close()
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("read error = %v, want ECONNRESET", err)
			}
		})
	}
}

// TestStallKeepalive: a mid-stream stall of 600ms after one piece, with ": keepalive" every
// 100ms, delays the second piece by the stall and fills the gap with comments. The bounds
// are generous: the stall is a scripted wait, not synchronisation.
func TestStallKeepalive(t *testing.T) {
	const stall, every = 600 * time.Millisecond, 100 * time.Millisecond
	s, base := start(t, Options{Kind: OpenAI})
	s.Script(Fault{Stall: stall, StallAfter: 1, Keepalive: every})
	sent := time.Now()
	evs, err := readSSE(post(t, nil, base+"/v1/chat/completions", chatStreamBody, nil), sent)
	if err != nil {
		t.Fatal(err)
	}
	// events: role chunk, piece 0, keepalives…, piece 1…
	first := slices.IndexFunc(evs, func(e rawEvent) bool { return e.comment != "" })
	last := first
	for last+1 < len(evs) && evs[last+1].comment != "" {
		last++
	}
	if first != 2 {
		t.Fatalf("keepalives should follow the first piece; events %+v", evs)
	}
	keepalives := last - first + 1
	if keepalives < 3 || keepalives > 7 || evs[first].comment != "keepalive" {
		t.Errorf("%d keepalives (%q) during a %v stall every %v", keepalives, evs[first].comment, stall, every)
	}
	if gap := evs[last+1].at - evs[1].at; gap < stall-50*time.Millisecond {
		t.Errorf("second piece came %v after the first, want about %v", gap, stall)
	}
	if d := dataOf(evs); d[len(d)-1] != "[DONE]" {
		t.Errorf("stream did not resume to [DONE]: %v", d)
	}
}

// TestFirstByteDelay: headers arrive at once, the first body byte after the delay — for
// SSE (Anthropic, via the header) and JSON (OpenAI).
func TestFirstByteDelay(t *testing.T) {
	const delay = 800 * time.Millisecond
	for _, tc := range []struct {
		name string
		kind Kind
		path string
		body string
	}{
		{name: "sse", kind: Anthropic, path: "/v1/messages", body: messagesStreamBody},
		{name: "json", kind: OpenAI, path: "/v1/chat/completions", body: `{"model":"gpt-4o-mini","messages":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, base := start(t, Options{Kind: tc.kind})
			hdr := map[string]string{"anthropic-version": "2023-06-01", FaultHeader: "first-byte=" + delay.String()}
			sent := time.Now()
			res := post(t, nil, base+tc.path, tc.body, hdr)
			headersAt := time.Since(sent)
			buf := make([]byte, 1)
			if _, err := io.ReadFull(res.Body, buf); err != nil {
				t.Fatal(err)
			}
			firstByteAt := time.Since(sent)
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if headersAt > delay/2 || firstByteAt < delay-50*time.Millisecond {
				t.Errorf("headers at %v, first byte at %v, delay %v", headersAt, firstByteAt, delay)
			}
		})
	}
}

// TestHeaderDelay: a stall before the status line trips the client's response-header
// timeout; the fake notices the client leaving. A shorter stall just delays the answer.
func TestHeaderDelay(t *testing.T) {
	s, base := start(t, Options{Kind: OpenAI})
	client := &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 200 * time.Millisecond}}
	t.Cleanup(client.CloseIdleConnections)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[]}`))
	req.Header.Set(FaultHeader, "header-delay=30s")
	if _, err := client.Do(req); err == nil || !strings.Contains(err.Error(), "timeout awaiting response headers") {
		t.Fatalf("err = %v, want a response-header timeout", err)
	}

	s.Script(Fault{HeaderDelay: 300 * time.Millisecond})
	sent := time.Now()
	res := post(t, nil, base+"/v1/chat/completions", `{"model":"m","messages":[]}`, nil)
	res.Body.Close()
	if took := time.Since(sent); res.StatusCode != 200 || took < 250*time.Millisecond {
		t.Errorf("status %d after %v", res.StatusCode, took)
	}
}

// TestCloseReleasesStall: Server.Close ends a handler that is stalling before its headers
// with a 503, so test servers shut down without waiting for scripted delays.
func TestCloseReleasesStall(t *testing.T) {
	s, base := start(t, Options{Kind: OpenAI})
	s.Script(Fault{HeaderDelay: time.Hour})
	type result struct {
		status int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		res.Body.Close()
		done <- result{status: res.StatusCode}
	}()
	// Close once the request is recorded (it then stalls).
	if err := s.WaitRequests(ctxTimeout(t, 5*time.Second), 1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	select {
	case r := <-done:
		if r.err != nil || r.status != http.StatusServiceUnavailable {
			t.Errorf("after Close: %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release the stalled handler")
	}
}

// TestRawBody: Body replaces the error verbatim, for an HTTP error (a proxy's HTML page)
// and for the in-band event (OpenRouter's numeric error.code, wire-formats §1.3).
func TestRawBody(t *testing.T) {
	s, base := start(t, Options{Kind: OpenAI})
	s.Script(Fault{Status: 502, Body: "<html>502 Bad Gateway</html>"},
		Fault{End: EndError, EndAfter: 1, Body: `{"error":{"code":502,"message":"upstream"}}`})

	res := post(t, nil, base+"/v1/chat/completions", `{"model":"m"}`, nil)
	if b := readAll(t, res); res.StatusCode != 502 || string(b) != "<html>502 Bad Gateway</html>" {
		t.Errorf("status %d body %s", res.StatusCode, b)
	}
	evs, err := readSSE(post(t, nil, base+"/v1/chat/completions", chatStreamBody, nil), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	d := dataOf(evs)
	if len(d) != 4 || d[2] != `{"error":{"code":502,"message":"upstream"}}` || d[3] != "[DONE]" {
		t.Errorf("events %v", d)
	}
}

// TestFilteredEnds: EndFiltered in each dialect's words — Anthropic stop_reason refusal,
// Responses response.incomplete with reason content_filter, OpenAI finish_reason
// content_filter — with usage counting the pieces sent.
func TestFilteredEnds(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		kind             Kind
		check            func(t *testing.T, evs []rawEvent)
	}{
		{name: "anthropic", kind: Anthropic, path: "/v1/messages", body: messagesStreamBody, check: func(t *testing.T, evs []rawEvent) {
			d := dataOf(evs)
			md := d[len(d)-2]
			if gjson.Get(md, "delta.stop_reason").String() != "refusal" || gjson.Get(md, "usage.output_tokens").Int() != 2 {
				t.Errorf("message_delta %s", md)
			}
		}},
		{name: "responses", kind: OpenAI, path: "/v1/responses", body: responsesStreamBody, check: func(t *testing.T, evs []rawEvent) {
			last := evs[len(evs)-1]
			if last.name != "response.incomplete" || gjson.Get(last.data, "response.incomplete_details.reason").String() != "content_filter" ||
				gjson.Get(last.data, "response.usage.output_tokens").Int() != 2 {
				t.Errorf("last event %s %s", last.name, last.data)
			}
		}},
		{name: "openai_chat", kind: OpenAI, path: "/v1/chat/completions", body: chatStreamBody, check: func(t *testing.T, evs []rawEvent) {
			d := dataOf(evs)
			if gjson.Get(d[len(d)-3], "choices.0.finish_reason").String() != "content_filter" || gjson.Get(d[len(d)-2], "usage.completion_tokens").Int() != 2 {
				t.Errorf("events %v", d)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, base := start(t, Options{Kind: tc.kind})
			evs, err := readSSE(post(t, nil, base+tc.path, tc.body, map[string]string{"anthropic-version": "2023-06-01", FaultHeader: "end=filtered; after=2"}), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, evs)
		})
	}
}

// TestEmbeddingsBase64: encoding_format "base64" carries the same vector as little-endian
// float32s (what openai-python requests by default).
func TestEmbeddingsBase64(t *testing.T) {
	_, base := start(t, Options{Kind: OpenAI})
	get := func(format string) gjson.Result {
		res := post(t, nil, base+"/v1/embeddings", `{"model":"e","input":"same","dimensions":4,"encoding_format":"`+format+`"}`, nil)
		return gjson.GetBytes(readAll(t, res), "data.0.embedding")
	}
	floats, encoded := get("float"), get("base64")
	raw, err := base64.StdEncoding.DecodeString(encoded.String())
	if err != nil || len(raw) != 16 {
		t.Fatalf("base64 %q: %v", encoded.String(), err)
	}
	for i, f := range floats.Array() {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != float32(f.Float()) {
			t.Errorf("dim %d: base64 %v, float %v", i, got, f.Float())
		}
	}
}
