package stream

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/extproc/sse"
)

// run is what the attempt role learns from one stream: every data event's verdict (with
// its raw length and, for errors, the Outcome's event name), and the end.
type run struct {
	Verdicts []string
	First    int // index in Verdicts of the first committing event, -1 if none
	Dropped  []string
	Final    []string // AppendFinal's output for each Final event
	// FinalAnomalies is Anomalies at each Final event (what unified_routing carries).
	FinalAnomalies [][]string
	Errors         []string // Outcome body of each error event
	End            Completion
}

func (r run) String() string {
	return fmt.Sprintf("verdicts=%v first=%d dropped=%q final=%q final-anomalies=%q errors=%q end=%+v",
		r.Verdicts, r.First, r.Dropped, r.Final, r.FinalAnomalies, r.Errors, r.End)
}

func flags(v Verdict) string {
	var b strings.Builder
	for _, f := range []struct {
		on bool
		c  byte
	}{{v.Output, 'O'}, {v.First, 'F'}, {v.Error, 'E'}, {v.Drop, 'D'}, {v.Final, 'L'}, {v.End, 'X'}, {v.Malformed, 'M'}} {
		if f.on {
			b.WriteByte(f.c)
		}
	}
	return b.String()
}

const testUnified = `{"strategy":"simple-shuffle","deployment":"d1"}`

// feed classifies chunks through a fresh parser and classifier.
func feed(d dialect.Dialect, opts Options, chunks ...[]byte) run {
	var p sse.Parser
	c := New(d, opts)
	r := run{First: -1}
	emit := func(ev *sse.Event) {
		v := c.Classify(ev)
		if ev.Kind != sse.KindEvent {
			return
		}
		if v.First {
			r.First = len(r.Verdicts)
		}
		r.Verdicts = append(r.Verdicts, fmt.Sprintf("%s:%s", typeName(ev), flags(v)))
		if v.Drop {
			r.Dropped = append(r.Dropped, string(ev.Data))
		}
		if v.Final {
			r.Final = append(r.Final, string(c.AppendFinal(nil, ev, []byte(testUnified))))
			r.FinalAnomalies = append(r.FinalAnomalies, c.Anomalies())
		}
		if v.Error {
			o := c.Outcome(ev)
			r.Errors = append(r.Errors, o.Event+"|"+string(o.Body))
		}
	}
	for _, ch := range chunks {
		p.Feed(ch, emit)
	}
	p.Flush(emit)
	r.End = c.End()
	return r
}

func typeName(ev *sse.Event) string {
	if t := typeOf(ev); t != "" {
		return t
	}
	if strings.HasPrefix(string(ev.Data), "[DONE]") {
		return "[DONE]"
	}
	return "data"
}

// assertSplitsAgree feeds body whole and split at every byte into two chunks, and fails
// on any difference.
func assertSplitsAgree(t *testing.T, d dialect.Dialect, opts Options, body []byte) run {
	t.Helper()
	whole := feed(d, opts, body)
	want := whole.String()
	for i := 0; i <= len(body); i++ {
		if got := feed(d, opts, body[:i], body[i:]).String(); got != want {
			t.Fatalf("split at byte %d:\n got %s\nwant %s", i, got, want)
		}
	}
	return whole
}

// variant is one real stream of the fake provider.
type variant struct {
	name  string
	kind  fakeprovider.Kind
	d     dialect.Dialect
	fault fakeprovider.Fault
	// usage: the request asks for stream_options.include_usage (Chat).
	usage bool
}

// body runs the fake provider in-process and returns the SSE body it streams for v.
func (v variant) body(t testing.TB) []byte {
	t.Helper()
	s, ts := fakeprovider.NewTestServer(t, fakeprovider.Options{Kind: v.kind})
	f := v.fault
	s.Script(f)
	var url, req string
	hdr := http.Header{"Content-Type": {"application/json"}}
	switch {
	case v.kind == fakeprovider.Azure:
		url = ts.URL + "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
		req = `{"messages":[{"role":"user","content":"hi"}],"stream":true`
	case v.d == dialect.Chat:
		url = ts.URL + "/v1/chat/completions"
		req = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream":true`
	case v.d == dialect.Responses:
		url = ts.URL + "/v1/responses"
		req = `{"model":"gpt-5","input":"hi","stream":true`
	default:
		url = ts.URL + "/v1/messages"
		req = `{"model":"claude-sonnet-4-5","max_tokens":256,"messages":[{"role":"user","content":"hi"}],"stream":true`
		hdr.Set("anthropic-version", "2023-06-01")
	}
	if v.usage {
		req += `,"stream_options":{"include_usage":true}`
	}
	req += "}"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header = hdr
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatalf("%s: %v", v.name, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s: reading the stream: %v", v.name, err)
	}
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%s: status %d %s: %s", v.name, res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	return b
}
