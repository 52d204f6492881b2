package fakeprovider

import (
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// messages answers Anthropic's Messages API (wire-formats §3). max_tokens is required and
// may be 0 (§3.1), so any value below the piece count cuts the answer.
func (x *exchange) messages() {
	pieces, o := x.plan(x.maxTokens("max_tokens"))
	if x.route.stream {
		x.stream(&messagesStream{x: x}, pieces, o)
		return
	}
	x.sendResult(pieces, o, x.message)
}

func (x *exchange) toolUseID() string { return fmt.Sprintf("toolu_fake_%d", x.id) }

// stopReason maps an outcome to stop_reason (wire-formats §3.2); a filtered answer is a
// "refusal" (summary item 7).
func (x *exchange) stopReason(o outcome) string {
	switch o {
	case outcomeLength:
		return "max_tokens"
	case outcomeFiltered:
		return "refusal"
	}
	if x.content.ToolCall != nil {
		return "tool_use"
	}
	return "end_turn"
}

// anthropicUsage: input_tokens excludes the cache, which is reported separately, and
// output_tokens counts the pieces sent (wire-formats §6). Anthropic has no total_tokens.
func (x *exchange) anthropicUsage(output int) string {
	c := x.content
	return fmt.Sprintf(`{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":%d,"output_tokens":%d,"service_tier":"standard"}`,
		c.PromptTokens-c.CachedTokens, c.CachedTokens, output)
}

// message is the non-streaming Message.
func (x *exchange) message(sent []string, o outcome) []byte {
	b := []byte(`{"id":"","type":"message","role":"assistant","model":"","content":[],"stop_reason":"","stop_sequence":null,"usage":{}}`)
	b = set(b, "id", fmt.Sprintf("msg_fake_%d", x.id))
	b = set(b, "model", x.route.respModel)
	b = set(b, "stop_reason", x.stopReason(o))
	joined := strings.Join(sent, "")
	switch tc := x.content.ToolCall; {
	case tc != nil:
		input := joined
		if !gjson.Valid(input) {
			input = "{}"
		}
		block := []byte(`{"type":"tool_use","id":"","name":"","input":{}}`)
		block = set(block, "id", x.toolUseID())
		block = set(block, "name", tc.Name)
		block = setRaw(block, "input", input)
		b = setRaw(b, "content", "["+string(block)+"]")
	case len(sent) > 0 || o != outcomeFiltered:
		b = setRaw(b, "content", "["+string(set([]byte(`{"type":"text","text":""}`), "text", joined))+"]")
	}
	return setRaw(b, "usage", x.anthropicUsage(len(sent)))
}

// messagesStream emits message_start, content_block_start, ping, content_block_delta…,
// content_block_stop, message_delta, message_stop — the shape of anthropic-sdk-python's
// tests/lib/streaming/fixtures/basic_response.txt (wire-formats §3.2).
type messagesStream struct {
	x *exchange
}

func (m *messagesStream) ev(typ string, fields ...string) sseEvent {
	b := set([]byte(`{"type":""}`), "type", typ)
	for i := 0; i+1 < len(fields); i += 2 {
		b = setRaw(b, fields[i], fields[i+1])
	}
	return event(typ, b)
}

func (m *messagesStream) head() []sseEvent {
	x := m.x
	// message_start reports a small output_tokens (1 in the fixture); message_delta then
	// reports the cumulative count. Report 0 when no piece will follow, so that the
	// cumulative count never goes down.
	startOut := 1
	if f := x.f(); len(x.content.pieces()) == 0 || (f.End.earlyEnd() && f.EndAfter == 0) {
		startOut = 0
	}
	msg := []byte(`{"id":"","type":"message","role":"assistant","content":[],"model":"","stop_reason":null,"stop_sequence":null,"usage":{}}`)
	msg = set(msg, "id", fmt.Sprintf("msg_fake_%d", x.id))
	msg = set(msg, "model", x.route.respModel)
	msg = setRaw(msg, "usage", x.anthropicUsage(startOut))
	block := `{"type":"text","text":""}`
	if tc := x.content.ToolCall; tc != nil {
		b := []byte(`{"type":"tool_use","id":"","name":"","input":{}}`)
		b = set(b, "id", x.toolUseID())
		block = string(set(b, "name", tc.Name))
	}
	return []sseEvent{
		m.ev("message_start", "message", string(msg)),
		m.ev("content_block_start", "index", "0", "content_block", block),
		m.ev("ping"),
	}
}

func (m *messagesStream) piece(_ int, p string) []sseEvent {
	delta := set([]byte(`{"type":"text_delta","text":""}`), "text", p)
	if m.x.content.ToolCall != nil {
		// Tool input streams as partial_json fragments (wire-formats §3.2 delta table).
		delta = set([]byte(`{"type":"input_json_delta","partial_json":""}`), "partial_json", p)
	}
	return []sseEvent{m.ev("content_block_delta", "index", "0", "delta", string(delta))}
}

func (m *messagesStream) tail(o outcome, sent []string, terminal bool) []sseEvent {
	delta := set([]byte(`{"stop_reason":"","stop_sequence":null}`), "stop_reason", m.x.stopReason(o))
	if m.x.f().End == EndNoStopReason {
		delta = []byte(`{"stop_reason":null,"stop_sequence":null}`)
	}
	evs := []sseEvent{
		m.ev("content_block_stop", "index", "0"),
		// message_delta usage is cumulative (wire-formats §3.2).
		m.ev("message_delta", "delta", string(delta), "usage", m.x.anthropicUsage(len(sent))),
	}
	if terminal {
		evs = append(evs, m.ev("message_stop"))
	}
	return evs
}

// inband is "event: error" with {"type":"error","error":{type,message}} — the HTTP body
// without request_id (wire-formats §3.3). anthropic-sdk-go turns it into an
// *anthropic.Error with the HTTP status 200 (packages/ssestream/ssestream.go).
func (m *messagesStream) inband(e apiError, _, raw bool) []sseEvent {
	body := e.body
	if !raw {
		if b, err := sjson.DeleteBytes(body, "request_id"); err == nil {
			body = b
		}
	}
	return []sseEvent{event("error", body)}
}
