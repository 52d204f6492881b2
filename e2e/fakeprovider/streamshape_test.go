package fakeprovider

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/tidwall/gjson"
)

// TestNoStopReason: EndNoStopReason ends Anthropic's stream with message_stop after a
// message_delta whose stop_reason is null, and Chat's with [DONE] after a finish chunk
// whose finish_reason is null; usage is still reported. anthropic-sdk-go accumulates
// the message without a stop reason and no error.
func TestNoStopReason(t *testing.T) {
	t.Run("anthropic", func(t *testing.T) {
		s, base := start(t, Options{Kind: Anthropic, APIKey: anthropicKey})
		s.Script(Fault{End: EndNoStopReason})
		evs, err := readSSE(post(t, nil, base+"/v1/messages", messagesStreamBody, map[string]string{"anthropic-version": "2023-06-01", "x-api-key": anthropicKey}), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		n, d := namesOf(evs), dataOf(evs)
		if n[len(n)-1] != "message_stop" || n[len(n)-2] != "message_delta" {
			t.Fatalf("want message_delta then message_stop last: %v", n)
		}
		delta := d[len(d)-2]
		if r := gjson.Get(delta, "delta.stop_reason"); !r.Exists() || r.Type != gjson.Null || gjson.Get(delta, "usage.output_tokens").Int() != 4 {
			t.Fatalf("message_delta %s: want a null stop_reason and the usage", delta)
		}

		s.Script(Fault{End: EndNoStopReason})
		st := anthropicClient(base).Messages.NewStreaming(ctxTimeout(t, 10*time.Second), messageParams())
		var msg anthropic.Message
		for st.Next() {
			if err := msg.Accumulate(st.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if st.Err() != nil || msg.StopReason != "" || len(msg.Content) != 1 || msg.Content[0].Text != defaultText {
			t.Fatalf("SDK: err %v, stop %q, content %+v", st.Err(), msg.StopReason, msg.Content)
		}
	})
	t.Run("chat", func(t *testing.T) {
		s, base := start(t, Options{Kind: OpenAI})
		s.Script(Fault{End: EndNoStopReason})
		evs, err := readSSE(post(t, nil, base+"/v1/chat/completions", chatStreamBody, nil), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		d := dataOf(evs)
		all := strings.Join(d, "\n")
		if d[len(d)-1] != "[DONE]" || strings.Contains(all, `"finish_reason":"`) || !gjson.Get(d[len(d)-2], "usage.total_tokens").Exists() {
			t.Fatalf("want no finish_reason, the usage chunk and [DONE]: %v", d)
		}
	})
}

// TestTinyWrites: TinyWrites sends the same stream as without it, in HTTP/1 chunks of 1
// to 7 bytes (one per flushed write), so a reader gets every event in pieces.
func TestTinyWrites(t *testing.T) {
	for _, tc := range []struct {
		kind       Kind
		path, body string
	}{
		{OpenAI, "/v1/chat/completions", chatStreamBody},
		{OpenAI, "/v1/responses", responsesStreamBody},
		{Anthropic, "/v1/messages", messagesStreamBody},
	} {
		t.Run(tc.path, func(t *testing.T) {
			s, base := start(t, Options{Kind: tc.kind})
			plain := rawStream(t, base, tc.path, tc.body)
			s.Reset() // the same ids again
			s.Script(Fault{TinyWrites: true})
			tiny := rawStream(t, base, tc.path, tc.body)
			if tiny.body != plain.body {
				t.Fatalf("tiny writes changed the stream:\n%s\nwant\n%s", tiny.body, plain.body)
			}
			sizes := map[int]bool{}
			for _, n := range tiny.chunks {
				if n < 1 || n > 7 {
					t.Fatalf("chunk of %d bytes; want 1 to 7: %v", n, tiny.chunks)
				}
				sizes[n] = true
			}
			if len(tiny.chunks) < len(plain.body)/7 || len(sizes) < 5 {
				t.Fatalf("%d chunks of sizes %v for %d bytes: want many, of varied sizes", len(tiny.chunks), sizes, len(plain.body))
			}
			if slices.Max(plain.chunks) <= 7 {
				t.Fatalf("without tiny writes the chunks are %v: the check proves nothing", plain.chunks)
			}
		})
	}
}

type rawResponse struct {
	body   string
	chunks []int // HTTP/1 chunk sizes, in order
}

// rawStream sends one streaming request over a bare TCP connection and decodes the
// chunked body by hand, keeping the chunk sizes Go's client would hide.
func rawStream(t *testing.T, base, path, body string) rawResponse {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: fake\r\nContent-Type: application/json\r\nAnthropic-Version: 2023-06-01\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", path, len(body), body)
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || len(res.TransferEncoding) == 0 {
		t.Fatalf("status %d, transfer-encoding %v", res.StatusCode, res.TransferEncoding)
	}
	// http.ReadResponse would decode the chunks; read them from br instead.
	var out rawResponse
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("chunk size: %v", err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(line), 16, 64)
		if err != nil {
			t.Fatalf("chunk size %q: %v", line, err)
		}
		if n == 0 {
			return rawResponse{body: b.String(), chunks: out.chunks}
		}
		out.chunks = append(out.chunks, int(n))
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			t.Fatal(err)
		}
		b.Write(buf[:n])
	}
}
