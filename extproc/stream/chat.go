package stream

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/extproc/sse"
	"github.com/switchyard-gw/switchyard/internal/rawjson"
)

var doneSentinel = []byte("[DONE]")

// chat reads a Chat Completions chunk (wire-formats §1.2–1.3, Azure §4.2). Data-only
// events; the event name is ignored, as openai-go's ssestream ignores it.
func (c *Classifier) chat(ev *sse.Event) Verdict {
	data := rawjson.TrimSpace(ev.Data)
	if bytes.HasPrefix(data, doneSentinel) {
		// openai-go and openai-python stop at a data that starts with [DONE].
		c.ended = true
		return Verdict{End: true, Final: true}
	}
	if len(data) == 0 || data[0] != '{' {
		return Verdict{Malformed: len(data) != 0}
	}
	var v Verdict
	emptyChoices, usage := false, ""
	rawjson.Members(view(data), 0, func(k, x string) bool {
		switch k {
		case "error":
			// Any non-null top-level error is terminal (§1.3; openai-go ssestream).
			if x != "null" {
				v.Error = true
			}
		case "choices":
			emptyChoices = !carries(x)
			rawjson.Elements(x, func(ch string) bool {
				if c.chatChoice(ch) {
					v.Output = true
				}
				return true
			})
		case "usage":
			usage = x
		case "id":
			if len(x) > 2 && x[0] == '"' {
				c.id = append(c.id[:0], x...)
			}
		case "created":
			if x != "" && x[0] >= '0' && x[0] <= '9' {
				c.created = append(c.created[:0], x...)
			}
		case "model":
			if len(x) > 2 && x[0] == '"' {
				c.mdl = append(c.mdl[:0], x...)
				c.modelSpan(ev.Data, x) // found in this walk: no second one (findModel)
			}
		}
		return true
	})
	if v.Error {
		return Verdict{Error: true}
	}
	if usage != "" && usage[0] == '{' {
		c.usage.setOpenAI(gjson.Parse(usage))
		// The usage chunk is "choices":[] with a non-null usage; Azure's annotation chunks
		// also have "choices":[] but usage null (wire-formats §4.2, §7). Usage on a chunk
		// with choices (some compatible servers) cannot be dropped without losing output.
		if emptyChoices && !c.opts.ClientUsage {
			v.Drop = true
		}
	}
	return v
}

// chatChoice records one streamed choice and reports whether it carries output: a
// non-empty content, reasoning_content / reasoning (DeepSeek, vLLM, OpenRouter), refusal,
// tool_calls or the deprecated function_call. A role-only delta, an empty content and a
// bare finish_reason do not.
func (c *Classifier) chatChoice(ch string) bool {
	var idx int64
	finished, finish := false, ""
	out, tools := false, false
	rawjson.Members(ch, 0, func(k, x string) bool {
		switch k {
		case "index":
			idx = gjson.Parse(x).Int()
		case "delta":
			rawjson.Members(x, 0, func(dk, dx string) bool {
				switch dk {
				case "content", "reasoning_content", "reasoning", "refusal":
					out = out || carries(dx)
				case "tool_calls", "function_call":
					if carries(dx) {
						out, tools = true, true
					}
				}
				return true
			})
		case "finish_reason":
			if x != "" && x[0] == '"' {
				finished, finish = true, x
			}
		}
		return true
	})
	c.tools = c.tools || tools
	if idx < 0 || idx >= maxChoices {
		c.untracked = true
		return out
	}
	for int(idx) >= len(c.choices) {
		c.choices = append(c.choices, choiceState{})
	}
	st := &c.choices[idx]
	st.seen = true
	st.tools = st.tools || tools
	if finished {
		st.finished = true
		if idx == 0 {
			c.finish = append(c.finish[:0], finish...)
		}
	}
	return out
}
