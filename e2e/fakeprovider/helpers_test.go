package fakeprovider

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// start runs a fake for the test and returns it with its base URL.
func start(t *testing.T, opts Options) (*Server, string) {
	t.Helper()
	s, ts := NewTestServer(t, opts)
	return s, ts.URL
}

// rawEvent is one SSE event, or comment, as a client reads it.
type rawEvent struct {
	name    string
	data    string
	comment string
	at      time.Duration // since the request was sent
}

// post sends a JSON body with headers and returns the response; the body is the caller's
// to close.
func post(t *testing.T, client *http.Client, url, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if client == nil {
		client = http.DefaultClient
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return res
}

// readSSE reads events until the body ends, returning them and the read error (nil on a
// clean EOF). It follows the framing of wire-formats §7: blank line ends an event, lines
// starting with ':' are comments.
func readSSE(res *http.Response, sent time.Time) ([]rawEvent, error) {
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	var evs []rawEvent
	var cur rawEvent
	var lines []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(lines) > 0 || cur.name != "" {
				cur.data = strings.Join(lines, "\n")
				cur.at = time.Since(sent)
				evs = append(evs, cur)
			}
			cur, lines = rawEvent{}, nil
		case strings.HasPrefix(line, ":"):
			evs = append(evs, rawEvent{comment: strings.TrimSpace(line[1:]), at: time.Since(sent)})
		case strings.HasPrefix(line, "event:"):
			cur.name = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:"):
			lines = append(lines, strings.TrimPrefix(line[len("data:"):], " "))
		}
	}
	return evs, sc.Err()
}

func dataOf(evs []rawEvent) []string {
	var out []string
	for _, e := range evs {
		if e.comment == "" {
			out = append(out, e.data)
		}
	}
	return out
}

func namesOf(evs []rawEvent) []string {
	var out []string
	for _, e := range evs {
		if e.comment == "" {
			out = append(out, e.name)
		}
	}
	return out
}

func readAll(t *testing.T, res *http.Response) []byte {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return bytes.TrimSpace(b)
}

// ctxTimeout bounds a test step that must not hang if the fake misbehaves.
func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
