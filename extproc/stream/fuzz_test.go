package stream

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/extproc/sse"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the fuzz corpora's real-provider streams from the fake provider")

// fuzzClassify checks the classifier's invariants on any input: splitting it changes
// nothing; the first committing event is the first with output, and comes once; an error
// event, and only one, ends the stream as Failed; only Chat drops events; a rewritten final
// event is still an event and carries unified_routing; the error event reads back as one.
func fuzzClassify(t *testing.T, d dialect.Dialect, body []byte, split uint16) {
	i := int(split) % (len(body) + 1)
	whole := feed(d, Options{}, body)
	if got, want := feed(d, Options{}, body[:i], body[i:]).String(), whole.String(); got != want {
		t.Fatalf("split at %d:\n got %s\nwant %s", i, got, want)
	}
	firstOutput := -1
	for k, v := range whole.Verdicts {
		if hasFlag(v, 'O') && firstOutput < 0 {
			firstOutput = k
		}
		if hasFlag(v, 'F') != (k == firstOutput) {
			t.Fatalf("event %d %s: first output is %d", k, v, firstOutput)
		}
		if hasFlag(v, 'D') && d != dialect.Chat {
			t.Fatalf("event %d %s dropped in %s", k, v, d)
		}
	}
	if (len(whole.Errors) > 0) != (whole.End.State == Failed) {
		t.Fatalf("errors %q but end %s", whole.Errors, whole.End.State)
	}
	for _, f := range whole.Final {
		var p sse.Parser
		var data []string
		emit := func(ev *sse.Event) {
			if ev.Kind == sse.KindEvent {
				data = append(data, string(ev.Data))
			}
		}
		p.Feed([]byte(f), emit)
		p.Flush(emit)
		if len(data) == 0 {
			t.Fatalf("final rewritten into no event: %q", f)
		}
		path := "unified_routing"
		if d == dialect.Responses {
			path = "response.unified_routing"
		}
		if d == dialect.Chat || gjson.Get(data[0], path).Raw == testUnified {
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(data[0]), "{") && gjson.Valid(data[0]) && gjson.Get(data[0], "response").IsObject() == (d == dialect.Responses) {
			t.Fatalf("unified_routing missing from %q", f)
		}
	}
	c := New(d, Options{})
	var p sse.Parser
	p.Feed(body, func(ev *sse.Event) { c.Classify(ev) })
	ev := c.AppendError(nil, ErrorInfo{Type: "server_error", Message: string(body[:min(len(body), 40)])}, "req-1")
	if back := feed(d, Options{}, ev); len(back.Errors) != 1 {
		t.Fatalf("error event %q reads back as %s", ev, back)
	}
}

func addSeeds(f *testing.F, d dialect.Dialect) {
	for _, tc := range fakeVariants {
		if tc.v.d == d {
			b := tc.v.body(f)
			f.Add(b, uint16(len(b)/2))
		}
	}
}

func FuzzClassifyChat(f *testing.F) {
	addSeeds(f, dialect.Chat)
	f.Fuzz(func(t *testing.T, body []byte, split uint16) { fuzzClassify(t, dialect.Chat, body, split) })
}

func FuzzClassifyResponses(f *testing.F) {
	addSeeds(f, dialect.Responses)
	f.Fuzz(func(t *testing.T, body []byte, split uint16) { fuzzClassify(t, dialect.Responses, body, split) })
}

func FuzzClassifyMessages(f *testing.F) {
	addSeeds(f, dialect.Messages)
	f.Fuzz(func(t *testing.T, body []byte, split uint16) { fuzzClassify(t, dialect.Messages, body, split) })
}

// TestFuzzCorpora: the committed corpora hold the fake provider's current streams (the
// classifier targets', split in the middle, and FuzzSSE's, split in three), so that plain
// `go test` replays real provider streams through every fuzz target. -update-corpus
// rewrites them.
func TestFuzzCorpora(t *testing.T) {
	target := map[dialect.Dialect]string{
		dialect.Chat: "FuzzClassifyChat", dialect.Responses: "FuzzClassifyResponses", dialect.Messages: "FuzzClassifyMessages",
	}
	for _, tc := range fakeVariants {
		body := tc.v.body(t)
		name := "real-" + strings.ReplaceAll(tc.v.name, "/", "-")
		files := map[string]string{
			filepath.Join("testdata", "fuzz", target[tc.v.d], name): fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nuint16(%d)\n", body, len(body)/2),
			filepath.Join("..", "sse", "testdata", "fuzz", "FuzzSSE", name): fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nuint16(%d)\nuint16(%d)\n",
				body, len(body)/3, 2*len(body)/3),
		}
		for path, want := range files {
			if *updateCorpus {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != want {
				t.Fatalf("%s is missing or stale (%v): run go test ./extproc/stream -run TestFuzzCorpora -update-corpus", path, err)
			}
		}
	}
}
