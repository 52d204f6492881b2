package dialect_test

import (
	"os"
	"testing"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/routing/config"
)

// One benchmark per Parse path, each on a 4 KiB chat request: tools and many short
// messages, one long prose message, and an image part (the media walk).

// BenchmarkParseChat4K parses a streaming chat request with tools and no media
// (testdata/chat4k.json, shared with the provider benchmarks).
func BenchmarkParseChat4K(b *testing.B) {
	benchParse(b, "testdata/chat4k.json", func(r dialect.Request) bool { return r.Facts.Tools })
}

// BenchmarkParsePlain4K parses a system message and one long user message of prose: no
// tools, no media (testdata/plain4k.json).
func BenchmarkParsePlain4K(b *testing.B) {
	benchParse(b, "testdata/plain4k.json", func(r dialect.Request) bool {
		return !r.Facts.Tools && r.Facts.Modalities == 0
	})
}

// BenchmarkParseImage4K parses a conversation whose last message has a base64 image part
// and a text part (testdata/image4k.json).
func BenchmarkParseImage4K(b *testing.B) {
	benchParse(b, "testdata/image4k.json", func(r dialect.Request) bool {
		return r.Facts.Modalities == config.ModalityImage
	})
}

func benchParse(b *testing.B, file string, ok func(dialect.Request) bool) {
	body, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	p := dialect.Parser{MaxBodyBytes: 1 << 20}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := p.Parse(dialect.Chat, body)
		if err != nil || !ok(r) {
			b.Fatal(r, err)
		}
	}
}
