package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The command serves the chosen dialect with the chosen key, and stops when its context ends.
func TestServesKindWithKey(t *testing.T) {
	for _, tc := range []struct {
		kind, path, body string
		auth             func(*http.Request, string)
		want             string
	}{
		{"openai", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			func(r *http.Request, k string) { r.Header.Set("Authorization", "Bearer "+k) }, `"object":"chat.completion"`},
		{"anthropic", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
			func(r *http.Request, k string) {
				r.Header.Set("x-api-key", k)
				r.Header.Set("anthropic-version", "2023-06-01")
			}, `"type":"message"`},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			ready := make(chan string, 1)
			done := make(chan error, 1)
			env := func(k string) string {
				if k == apiKeyEnv {
					return "sk-from-env"
				}
				return ""
			}
			go func() {
				done <- run(ctx, []string{"-kind", tc.kind, "-listen", "127.0.0.1:0"}, env, io.Discard, ready)
			}()
			var addr string
			select {
			case addr = <-ready:
			case err := <-done:
				t.Fatal(err)
			case <-time.After(10 * time.Second):
				t.Fatal("not listening")
			}
			post := func(key string) (int, string) {
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+tc.path, bytes.NewBufferString(tc.body))
				req.Header.Set("Content-Type", "application/json")
				tc.auth(req, key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			if code, body := post("sk-from-env"); code != 200 || !strings.Contains(body, tc.want) {
				t.Fatalf("with the key: %d %s", code, body)
			}
			if code, _ := post("sk-wrong"); code != http.StatusUnauthorized {
				t.Fatalf("with a wrong key: %d, want 401", code)
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("did not stop")
			}
		})
	}
}

func TestRejectsUnknownKind(t *testing.T) {
	err := run(context.Background(), []string{"-kind", "bedrock"}, func(string) string { return "" }, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "bedrock") {
		t.Fatalf("err = %v", err)
	}
}
