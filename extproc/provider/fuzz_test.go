package provider_test

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/extproc/provider"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

// FuzzRewrite: for any body Parse accepts, the body sent is valid JSON whose model is the
// provider's, whose content-length is its length, and the client's body is untouched.
// Seed corpus: testdata/fuzz/FuzzRewrite/.
func FuzzRewrite(f *testing.F) {
	up, err := provider.Compile(dep(failure.ProviderOpenAI, "https://api.openai.com", "provider-model", "k", ""))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := dialect.Parser{}.Parse(dialect.Chat, body)
		if err != nil {
			return
		}
		orig := bytes.Clone(body)
		rw, err := up.Rewrite(provider.Input{Dialect: dialect.Chat, Stream: req.Stream, IncludeUsage: true, Body: body})
		if err != nil {
			t.Fatalf("Rewrite of a parsed body: %v", err)
		}
		if !bytes.Equal(body, orig) {
			t.Fatal("client body changed")
		}
		sent := body
		if rw.Body != nil {
			sent = rw.Body
			cl := ""
			for _, h := range rw.Set {
				if h.Name == "content-length" {
					cl = h.Value
				}
			}
			if cl != strconv.Itoa(len(sent)) {
				t.Fatalf("content-length %q for %d bytes", cl, len(sent))
			}
		}
		if rw.ContentLength != len(sent) || !gjson.ValidBytes(sent) || gjson.GetBytes(sent, "model").String() != "provider-model" {
			t.Fatalf("sent %q (length %d)", sent, rw.ContentLength)
		}
		if req.Stream && !gjson.GetBytes(sent, "stream_options.include_usage").Bool() {
			t.Fatalf("stream without usage: %q", sent)
		}
	})
}
