package dialect_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/routing/config"
)

// Seed corpora: testdata/fuzz/FuzzParse<Dialect>/.

func FuzzParseChat(f *testing.F)       { fuzzParse(f, dialect.Chat) }
func FuzzParseResponses(f *testing.F)  { fuzzParse(f, dialect.Responses) }
func FuzzParseMessages(f *testing.F)   { fuzzParse(f, dialect.Messages) }
func FuzzParseEmbeddings(f *testing.F) { fuzzParse(f, dialect.Embeddings) }

// fuzzParse checks Parse's contract on any body: it never panics nor touches the body; it
// fails only with a *Error of its documented statuses, in d's family, that renders as JSON;
// what it returns is consistent.
func fuzzParse(f *testing.F, d dialect.Dialect) {
	const limit = 64 << 10
	p := dialect.Parser{MaxBodyBytes: limit}
	f.Fuzz(func(t *testing.T, body []byte) {
		orig := bytes.Clone(body)
		r, err := p.Parse(d, body)
		if !bytes.Equal(body, orig) {
			t.Fatal("Parse changed the body")
		}
		if err != nil {
			var e *dialect.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not a *dialect.Error", err)
			}
			if e.Family != d.Family() || (e.Status != 400 && e.Status != 404 && e.Status != 413) || e.Message == "" {
				t.Fatalf("error %+v", e)
			}
			if (e.Status == 413) != (len(body) > limit) {
				t.Fatalf("413 iff over the limit: %+v, %d bytes", e, len(body))
			}
			if b := e.Render("r").Body; !json.Valid(b) {
				t.Fatalf("rendered error is not JSON: %s", b)
			}
			return
		}
		if !gjson.ValidBytes(body) || r.Model == "" || r.Model != gjson.GetBytes(body, "model").String() || r.Dialect != d {
			t.Fatalf("accepted %q as %+v", body, r)
		}
		fa := r.Facts
		if fa.PromptTokens < 0 || fa.PromptTokens > 1<<40 || fa.MaxOutputTokens < 0 || fa.MaxOutputTokens > 1<<40 {
			t.Fatalf("token counts out of range: %+v", fa)
		}
		if fa.ParallelToolCalls && !fa.Tools {
			t.Fatalf("inconsistent %+v", r)
		}
		if fa.Modalities&^(config.ModalityImage|config.ModalityAudio) != 0 {
			t.Fatalf("modalities %b", fa.Modalities)
		}
		if (d == dialect.Embeddings) != (r.Operation == config.OpEmbeddings) || d == dialect.Embeddings && r.Stream {
			t.Fatalf("operation/stream %+v", r)
		}
	})
}
