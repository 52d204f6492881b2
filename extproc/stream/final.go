package stream

import (
	"bytes"

	"github.com/tidwall/sjson"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/extproc/sse"
	"github.com/switchyard-gw/switchyard/internal/rawjson"
)

// AppendFinal appends to dst the bytes the client receives in place of the final event ev
// (one Classify marked Final), carrying unified, the raw JSON of the unified_routing object
// (behaviour §10.1, the same object as on a JSON response):
//
//   - Chat: a chunk of its own, {"id","object":"chat.completion.chunk","created","model",
//     "choices":[],"unified_routing"}, inserted before ev ([DONE]). It repeats the stream's
//     id, which openai-go's ChatCompletionAccumulator requires of every chunk, and has no
//     choices, like the usage chunk, so SDKs and accumulators take it as a no-op; patching the
//     last content chunk instead would mean holding every chunk until the next arrives. With
//     ev nil (a stream that finished every choice without [DONE]) only the chunk is
//     appended, for the caller to send at the end of the body.
//   - Anthropic: ev (message_delta, or message_stop when no message_delta carried a
//     stop_reason) with a top-level "unified_routing"; the SDKs keep unknown fields
//     (anthropic-sdk-go JSON.ExtraFields).
//   - Responses: ev (response.completed or response.incomplete) with
//     "response.unified_routing": the final Response object is what the SDKs hand out
//     (openai-go Response.JSON.ExtraFields), and on a JSON response unified_routing is a
//     field of that same object.
//
// If ev's data cannot be patched (not a JSON object), ev goes out unchanged.
func (c *Classifier) AppendFinal(dst []byte, ev *sse.Event, unified []byte) []byte {
	if c.d == dialect.Chat {
		dst = c.appendUnifiedChunk(dst, unified)
		if ev != nil {
			dst = append(dst, ev.Raw...)
		}
		return dst
	}
	if ev == nil {
		return dst
	}
	path := "unified_routing"
	if c.d == dialect.Responses {
		path = "response.unified_routing"
	}
	if d := rawjson.TrimSpace(ev.Data); len(d) == 0 || d[0] != '{' {
		return append(dst, ev.Raw...)
	}
	patched, err := sjson.SetRawBytes(c.publicData(ev), path, unified)
	if err != nil {
		return append(dst, ev.Raw...)
	}
	return appendEvent(dst, ev.Name, patched)
}

func (c *Classifier) appendUnifiedChunk(dst, unified []byte) []byte {
	dst = append(dst, `data: {"id":`...)
	dst = appendOr(dst, c.id, `""`)
	dst = append(dst, `,"object":"chat.completion.chunk","created":`...)
	dst = appendOr(dst, c.created, `0`)
	dst = append(dst, `,"model":`...)
	if len(c.model) > 0 {
		dst = append(dst, c.model...)
	} else {
		dst = appendOr(dst, c.mdl, `""`)
	}
	dst = append(dst, `,"choices":[],"unified_routing":`...)
	dst = append(dst, unified...)
	return append(dst, "}\n\n"...)
}

func appendOr(dst, v []byte, def string) []byte {
	if len(v) == 0 {
		return append(dst, def...)
	}
	return append(dst, v...)
}

// appendEvent frames data as one SSE event; data holding newlines becomes several data
// lines, which the client joins back (wire-formats §7).
func appendEvent(dst, name, data []byte) []byte {
	if len(name) > 0 {
		dst = append(dst, "event: "...)
		dst = append(dst, name...)
		dst = append(dst, '\n')
	}
	for {
		line, rest, more := bytes.Cut(data, []byte("\n"))
		dst = append(dst, "data: "...)
		dst = append(dst, bytes.TrimSuffix(line, []byte("\r"))...)
		dst = append(dst, '\n')
		if !more {
			break
		}
		data = rest
	}
	return append(dst, '\n')
}
