package stream

import (
	"encoding/json"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/extproc/sse"
)

// A streamed answer names the public model wherever the provider named its own: every Chat
// chunk's "model", Anthropic's message_start "message.model", a Responses event's
// "response.model" (response.created, .in_progress, .completed, …). Options.Model is the
// public model; Classify finds the value's span in the event's data and AppendEvent writes
// the event with the public name in it.

// Where each dialect's events carry the model: every Chat chunk (its top-level "model",
// which the chat reader meets in its own walk, modelSpan), Anthropic's message_start and
// the Responses events with a response object (not the deltas, the bulk of a stream); those
// readers call findModel with the path once they know the event's type.
const (
	messagesModelPath  = "message.model"
	responsesModelPath = "response.model"
)

// modelSpan records the span of raw, a JSON string value inside data (ev.Data), as the
// model to rewrite when it differs from the public model; the first one of an event counts.
func (c *Classifier) modelSpan(data []byte, raw string) {
	if len(c.model) == 0 || c.modelTo > c.modelFrom || raw == string(c.model) {
		return
	}
	if off, ok := within(data, unsafe.Slice(unsafe.StringData(raw), len(raw))); ok {
		c.modelFrom, c.modelTo = off, off+len(raw)
	}
}

// findModel records the span of ev's model value at path in ev.Data when it differs from
// the public model (c.modelFrom < c.modelTo), so that AppendEvent rewrites it.
func (c *Classifier) findModel(ev *sse.Event, path string) {
	if len(c.model) == 0 {
		return
	}
	r := gjson.Get(view(ev.Data), path)
	if r.Type != gjson.String || r.Index <= 0 || r.Raw == string(c.model) {
		return
	}
	c.modelFrom, c.modelTo = r.Index, r.Index+len(r.Raw)
}

// quoteModel is the public model as a JSON string, or nil for none.
func quoteModel(m string) []byte {
	if m == "" {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	return b
}

// AppendEvent appends the bytes the client receives for ev, the event Classify read last:
// ev as received, with the public model in place of the provider's.
func (c *Classifier) AppendEvent(dst []byte, ev *sse.Event) []byte {
	if c.modelTo <= c.modelFrom {
		return append(dst, ev.Raw...)
	}
	if off, ok := within(ev.Raw, ev.Data); ok {
		// One data line (nearly always): splice the value into the event as received.
		dst = append(dst, ev.Raw[:off+c.modelFrom]...)
		dst = append(dst, c.model...)
		return append(dst, ev.Raw[off+c.modelTo:]...)
	}
	return appendEvent(dst, ev.Name, c.publicData(ev))
}

// publicData is ev's data with the public model in place of the provider's (a copy).
func (c *Classifier) publicData(ev *sse.Event) []byte {
	if c.modelTo <= c.modelFrom {
		return append([]byte(nil), ev.Data...)
	}
	out := make([]byte, 0, len(ev.Data)-(c.modelTo-c.modelFrom)+len(c.model))
	out = append(out, ev.Data[:c.modelFrom]...)
	out = append(out, c.model...)
	return append(out, ev.Data[c.modelTo:]...)
}

// within reports the offset of sub in b when sub lies inside b. It compares addresses:
// the parser hands out Data with its capacity clipped to its length, so sub's capacity says
// nothing about where it sits.
func within(b, sub []byte) (int, bool) {
	if len(sub) == 0 || len(b) == 0 {
		return 0, false
	}
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(sub))) - uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	if off < 0 || off+len(sub) > len(b) || &b[off] != &sub[0] {
		return 0, false
	}
	return off, true
}
