package provider_test

import (
	"os"
	"testing"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/extproc/provider"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

// BenchmarkRewriteChat4K rewrites the 4 KiB chat request of the dialect benchmarks for an
// OpenAI deployment: path, credentials, headers, and the body's model (the stream already
// asks for usage). BenchmarkRewriteChat4KSameModel is the common case where the public and
// provider models agree and the body is left alone.
func BenchmarkRewriteChat4K(b *testing.B) {
	benchRewrite(b, "gpt-4o-2024-08-06")
}

func BenchmarkRewriteChat4KSameModel(b *testing.B) {
	benchRewrite(b, "gpt-4o")
}

func benchRewrite(b *testing.B, model string) {
	body, err := os.ReadFile("../dialect/testdata/chat4k.json")
	if err != nil {
		b.Fatal(err)
	}
	up, err := provider.Compile(dep(failure.ProviderOpenAI, "https://api.openai.com/v1", model, "sk-provider", ""))
	if err != nil {
		b.Fatal(err)
	}
	hs := names(":method", ":path", ":authority", "content-type", "authorization", "content-length", "x-switchyard-state", "user-agent", "x-stainless-retry-count")
	in := provider.Input{Dialect: dialect.Chat, Stream: true, IncludeUsage: true, Body: body, HeaderNames: hs}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		rw, err := up.Rewrite(in)
		if err != nil || rw.Path != "/v1/chat/completions" {
			b.Fatal(rw, err)
		}
	}
}
