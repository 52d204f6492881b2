package stream

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/extproc/sse"
	"github.com/switchyard-gw/switchyard/internal/rawjson"
)

// typeOf is the event's type: its event name, or else its data's "type" (Responses and
// Anthropic repeat the name there, wire-formats §2.1, §3.2; some compatible servers send
// data-only events). The result aliases ev: compare it, do not keep it.
func typeOf(ev *sse.Event) string {
	if len(ev.Name) > 0 {
		return view(ev.Name)
	}
	return gjson.Get(view(ev.Data), "type").Str
}

// responsesFields are the members of a Responses event the classifier reads, as raw JSON
// values, gathered in one walk of the event (the first of each, as gjson would find).
type responsesFields struct {
	typ, seq, errorValue, item, response, delta string
}

func readResponsesFields(data string) responsesFields {
	var f responsesFields
	rawjson.Members(data, 0, func(k, v string) bool {
		var dst *string
		switch k {
		case "type":
			dst = &f.typ
		case "sequence_number":
			dst = &f.seq
		case "error":
			dst = &f.errorValue
		case "item":
			dst = &f.item
		case "response":
			dst = &f.response
		case "delta":
			dst = &f.delta
		default:
			return true
		}
		if *dst == "" {
			*dst = v
		}
		return true
	})
	return f
}

// responses reads a Responses API event (wire-formats §2.1–2.2).
func (c *Classifier) responses(ev *sse.Event) Verdict {
	data := view(rawjson.TrimSpace(ev.Data))
	if strings.HasPrefix(data, "[DONE]") {
		// Not documented for Responses, but tolerated (the SDK checks for it, §2.1).
		return Verdict{}
	}
	if len(data) == 0 || data[0] != '{' {
		return Verdict{Malformed: len(data) != 0}
	}
	f := readResponsesFields(data)
	typ := view(ev.Name)
	if typ == "" {
		typ = gjson.Parse(f.typ).Str
	}
	if n := gjson.Parse(f.seq); n.Type == gjson.Number && n.Int() > c.seq {
		c.seq = n.Int()
	}
	if strings.HasPrefix(typ, "response.") && !strings.HasSuffix(typ, ".delta") {
		c.findModel(ev, responsesModelPath)
	}
	switch typ {
	case "error", "response.failed":
		return Verdict{Error: true}
	case "response.completed", "response.incomplete":
		c.ended = true
		resp := gjson.Parse(f.response)
		c.usage.setOpenAI(resp.Get("usage"))
		reason := resp.Get("incomplete_details.reason")
		if reason.Type != gjson.String {
			reason = resp.Get("status")
		}
		if reason.Type == gjson.String {
			c.finish = append(c.finish[:0], reason.Raw...)
		}
		return Verdict{End: true, Final: true}
	case "response.output_item.added":
		c.items++
		// A tool call is output as soon as its item opens (function_call, and the
		// built-in tools' *_call items: web_search_call, code_interpreter_call, ...).
		if t := gjson.Get(f.item, "type").Str; strings.HasSuffix(t, "_call") {
			c.tools = true
			return Verdict{Output: true}
		}
		return Verdict{}
	case "response.output_item.done":
		c.itemsDone++
		return Verdict{}
	}
	if typ == "" && f.errorValue != "" && f.errorValue != "null" {
		// A data-only {"error":{...}} (the chat shape, which openai-go turns into a
		// StreamError on any endpoint).
		return Verdict{Error: true}
	}
	// Every delta event carries output: response.output_text.delta, .refusal.delta,
	// .reasoning_text.delta, .reasoning_summary_text.delta, .function_call_arguments.delta,
	// .custom_tool_call_input.delta, .audio.delta, ... An empty delta shows nothing.
	if strings.HasPrefix(typ, "response.") && strings.HasSuffix(typ, ".delta") {
		if strings.Contains(typ, "function_call") || strings.Contains(typ, "tool_call") {
			c.tools = true
		}
		return Verdict{Output: carries(f.delta)}
	}
	return Verdict{}
}
