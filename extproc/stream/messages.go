package stream

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/extproc/sse"
	"github.com/switchyard-gw/switchyard/internal/rawjson"
)

// messages reads an Anthropic Messages event (wire-formats §3.2–3.3). Unknown events are
// ignored, as Anthropic asks ("we may add new event types").
func (c *Classifier) messages(ev *sse.Event) Verdict {
	data := view(rawjson.TrimSpace(ev.Data))
	if len(data) == 0 || data[0] != '{' {
		return Verdict{Malformed: len(data) != 0}
	}
	root := gjson.Parse(data)
	switch typeOf(ev) {
	case "error":
		return Verdict{Error: true}
	case "message_start":
		c.findModel(ev, messagesModelPath)
		c.usage.mergeAnthropic(root.Get("message.usage"), &c.anthropicIn)
	case "content_block_start":
		return Verdict{Output: c.blockStart(member(data, "content_block"))}
	case "content_block_delta":
		return Verdict{Output: deltaOutput(member(data, "delta"))}
	case "message_delta":
		c.usage.mergeAnthropic(root.Get("usage"), &c.anthropicIn)
		if r := root.Get("delta.stop_reason"); r.Type == gjson.String {
			c.stopSeen = true
			c.finish = append(c.finish[:0], r.Raw...)
			return Verdict{Final: true}
		}
	case "message_stop":
		c.ended = true
		// Without a message_delta to carry it, unified_routing goes on message_stop.
		return Verdict{End: true, Final: !c.stopSeen}
	}
	return Verdict{}
}

// blockStart reports whether a content block's start is output: a tool use (tool_use,
// server_tool_use, mcp_tool_use), a server tool's result, redacted thinking — anything but
// an empty text or thinking block, whose content comes in deltas.
func (c *Classifier) blockStart(b string) bool {
	switch t := gjson.Get(b, "type").Str; {
	case t == "text":
		return carries(member(b, "text"))
	case t == "thinking":
		return carries(member(b, "thinking"))
	case t == "":
		return false
	case strings.HasSuffix(t, "tool_use"):
		c.tools = true
		return true
	default:
		return true
	}
}

// deltaOutput reports whether a content_block_delta carries something: text_delta text,
// input_json_delta partial_json, thinking_delta thinking, signature_delta signature,
// citations_delta citation; an unknown delta type counts as output.
func deltaOutput(d string) bool {
	switch gjson.Get(d, "type").Str {
	case "text_delta":
		return carries(member(d, "text"))
	case "input_json_delta":
		return carries(member(d, "partial_json"))
	case "thinking_delta":
		return carries(member(d, "thinking"))
	case "signature_delta":
		return carries(member(d, "signature"))
	case "citations_delta":
		return carries(member(d, "citation"))
	case "":
		return false
	}
	return true
}
