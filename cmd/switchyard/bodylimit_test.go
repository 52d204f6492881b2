package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
)

// Large request bodies through the binary behind envoysim (issue: a 5 MB request got a
// bare 503 because the ext_proc gRPC server kept gRPC's 4 MiB receive limit).

// bodyLimitGateway starts fakes (OpenAI, Anthropic), the binary with args, and envoysim
// with the template's listener buffer at maxBody (0: the template's default).
func bodyLimitGateway(t *testing.T, maxBody int, args ...string) (ingress string) {
	t.Helper()
	oai, err := fakeprovider.New(fakeprovider.Options{Kind: fakeprovider.OpenAI})
	if err != nil {
		t.Fatal(err)
	}
	ant, err := fakeprovider.New(fakeprovider.Options{Kind: fakeprovider.Anthropic})
	if err != nil {
		t.Fatal(err)
	}
	ts1, ts2 := httptest.NewServer(oai), httptest.NewServer(ant)
	t.Cleanup(func() { ts1.Close(); ts2.Close(); oai.Close(); ant.Close() })
	cfg := `{"deployments":[
	 {"id":"oai","publicModel":"gpt-4o","provider":"openai","baseUrl":"` + ts1.URL + `","providerModel":"gpt-4o","apiKey":"sk-oai"},
	 {"id":"ant","publicModel":"claude","provider":"anthropic","baseUrl":"` + ts2.URL + `","providerModel":"claude-sonnet-4","apiKey":"sk-ant"}]}`
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	in := start(t, append([]string{"-config", path}, args...)...)
	params := map[string]any{}
	if maxBody > 0 {
		params["MaxRequestBody"] = maxBody
	}
	return behindEnvoyWith(t, in, in, map[string]string{
		"oai": strings.TrimPrefix(ts1.URL, "http://"), "ant": strings.TrimPrefix(ts2.URL, "http://")}, params)
}

// dialectCase is one client dialect: its path, a body of exactly n bytes, and how its
// success and its error look.
type dialectCase struct {
	name, path string
	headers    map[string]string
	body       func(n int, stream bool) []byte
	// ok checks a successful answer; shaped checks an error in the dialect's shape.
	ok     func(body []byte, stream bool) bool
	shaped func(body []byte) bool
}

var dialectCases = []dialectCase{
	{
		name: "chat", path: "/v1/chat/completions",
		body: func(n int, stream bool) []byte {
			return padded(`{"model":"gpt-4o","stream":`+strconv.FormatBool(stream)+`,"messages":[{"role":"user","content":"`, `"}]}`, n)
		},
		ok: func(b []byte, stream bool) bool {
			if stream {
				return bytes.Contains(b, []byte("data: [DONE]"))
			}
			return gjson.GetBytes(b, "choices.0.message.content").String() != ""
		},
		shaped: func(b []byte) bool {
			return gjson.GetBytes(b, "error.message").String() != "" && gjson.GetBytes(b, "error.type").String() != ""
		},
	},
	{
		name: "messages", path: "/v1/messages", headers: map[string]string{"anthropic-version": "2023-06-01"},
		body: func(n int, stream bool) []byte {
			return padded(`{"model":"claude","max_tokens":16,"stream":`+strconv.FormatBool(stream)+`,"messages":[{"role":"user","content":"`, `"}]}`, n)
		},
		ok: func(b []byte, stream bool) bool {
			if stream {
				return bytes.Contains(b, []byte("message_stop"))
			}
			return gjson.GetBytes(b, "content.0.text").String() != ""
		},
		shaped: func(b []byte) bool {
			return gjson.GetBytes(b, "type").String() == "error" && gjson.GetBytes(b, "error.type").String() != "" &&
				gjson.GetBytes(b, "error.message").String() != ""
		},
	},
}

// padded is prefix + 'a'… + suffix, n bytes in all.
func padded(prefix, suffix string, n int) []byte {
	b := make([]byte, 0, n)
	b = append(b, prefix...)
	b = append(b, bytes.Repeat([]byte("a"), n-len(prefix)-len(suffix))...)
	return append(b, suffix...)
}

// send posts body to ingress+path; chunked hides its length (no content-length).
func send(t *testing.T, ingress string, c dialectCase, body []byte, chunked bool) (int, http.Header, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var r io.Reader = bytes.NewReader(body)
	if chunked {
		r = io.MultiReader(r) // not a *bytes.Reader: net/http cannot know the length
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ingress+c.path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-client")
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	// One connection per request: a reply written before the body was read leaves the rest
	// of that body on the connection (envoysim, like Go's server, does not always close it),
	// which would be read as the next request.
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", c.path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, out
}

func short(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// TestLargeRequestsSucceedWithTheDefaults: 1 KB, 5 MB and 30 MB chat and messages requests,
// JSON and streamed, succeed with the default body limit.
func TestLargeRequestsSucceedWithTheDefaults(t *testing.T) {
	ingress := bodyLimitGateway(t, 0)
	for _, c := range dialectCases {
		for _, n := range []int{1 << 10, 5_000_000, 30_000_000} {
			for _, stream := range []bool{false, true} {
				code, _, out := send(t, ingress, c, c.body(n, stream), false)
				if code != http.StatusOK || !c.ok(out, stream) {
					t.Errorf("%s %d bytes stream=%v: %d %s", c.name, n, stream, code, short(out))
				}
			}
		}
	}
}

// limit is the small -max-request-body of the over-the-limit tests (a 32 MiB body each
// time would only make them slow).
const limit = 1 << 20

// TestOverTheLimitGetsTheDialects413: a body of limit+1 bytes gets the client dialect's
// 413, whether it declares its length (the route role checks content-length at request
// headers) or is chunked (Envoy's buffer overflows; local_reply_config shapes its 413); a
// body of exactly the limit still succeeds.
func TestOverTheLimitGetsTheDialects413(t *testing.T) {
	ingress := bodyLimitGateway(t, limit, "-max-request-body", strconv.Itoa(limit))
	for _, c := range dialectCases {
		for _, stream := range []bool{false, true} {
			if code, _, out := send(t, ingress, c, c.body(limit, stream), false); code != http.StatusOK || !c.ok(out, stream) {
				t.Errorf("%s at the limit, stream=%v: %d %s", c.name, stream, code, short(out))
			}
			for _, chunked := range []bool{false, true} {
				code, h, out := send(t, ingress, c, c.body(limit+1, stream), chunked)
				if code != http.StatusRequestEntityTooLarge || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || !c.shaped(out) {
					t.Errorf("%s limit+1, stream=%v chunked=%v: %d %s %s, want the dialect's 413", c.name, stream, chunked, code, h.Get("Content-Type"), short(out))
				}
			}
		}
	}
}

// TestSwitchyardAnswersKeepTheirShape: a route-role answer (404 model_not_found) is not
// rewritten by the bootstrap's local_reply_config mappers.
func TestSwitchyardAnswersKeepTheirShape(t *testing.T) {
	ingress := bodyLimitGateway(t, 0)
	chat := dialectCases[0]
	code, _, out := send(t, ingress, chat, []byte(`{"model":"no-such-model","messages":[{"role":"user","content":"hi"}]}`), false)
	if code != http.StatusNotFound || gjson.GetBytes(out, "error.code").String() != "model_not_found" {
		t.Errorf("unknown model: %d %s, want switchyard's own 404 model_not_found", code, short(out))
	}
}

// TestDeadRouteRoleGetsTheDialects503: with nothing at the route role's address, Envoy's
// 503 (ext_proc status_on_error) reaches the client in its dialect's shape.
func TestDeadRouteRoleGetsTheDialects503(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	nobody := &instance{extproc: dead, trampoline: dead}
	ingress := behindEnvoyWith(t, nobody, nobody, map[string]string{"oai": dead}, nil)
	for _, c := range dialectCases {
		code, h, out := send(t, ingress, c, c.body(1<<10, false), false)
		if code != http.StatusServiceUnavailable || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || !c.shaped(out) {
			t.Errorf("%s with the route role down: %d %s %s, want the dialect's 503", c.name, code, h.Get("Content-Type"), short(out))
		}
	}
}
