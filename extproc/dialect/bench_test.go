package dialect_test

import (
	"os"
	"testing"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
)

// BenchmarkParseChat4K parses a 4 KiB streaming chat request with tools
// (testdata/chat4k.json, shared with the provider benchmarks).
func BenchmarkParseChat4K(b *testing.B) {
	body, err := os.ReadFile("testdata/chat4k.json")
	if err != nil {
		b.Fatal(err)
	}
	p := dialect.Parser{MaxBodyBytes: 1 << 20}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := p.Parse(dialect.Chat, body)
		if err != nil || !r.Facts.Tools {
			b.Fatal(r, err)
		}
	}
}
