package fakeprovider

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// responses answers the Responses API (wire-formats §2).
func (x *exchange) responses() {
	pieces, o := x.plan(x.maxTokens("max_output_tokens"))
	if x.route.stream {
		x.stream(&responsesStream{x: x}, pieces, o)
		return
	}
	x.sendResult(pieces, o, func(sent []string, o outcome) []byte {
		status, reason := responseStatus(o)
		return x.responseObject(status, reason, "["+x.outputItem(sent, status)+"]", responsesUsage(x.content.usage(len(sent))))
	})
}

func (x *exchange) itemID() string {
	if x.content.ToolCall != nil {
		return fmt.Sprintf("fc_fake_%d", x.id)
	}
	return fmt.Sprintf("msg_fake_%d", x.id)
}

// responseStatus maps an outcome to Response.status and incomplete_details.reason
// (wire-formats §2.1: max_output_tokens or content_filter).
func responseStatus(o outcome) (status, reason string) {
	switch o {
	case outcomeLength:
		return "incomplete", "max_output_tokens"
	case outcomeFiltered:
		return "incomplete", "content_filter"
	}
	return "completed", ""
}

// responsesUsage is ResponseUsage (wire-formats §2.1, §6).
func responsesUsage(t tokens) string {
	return fmt.Sprintf(`{"input_tokens":%d,"input_tokens_details":{"cached_tokens":%d},"output_tokens":%d,`+
		`"output_tokens_details":{"reasoning_tokens":%d},"total_tokens":%d}`,
		t.prompt, t.cached, t.completion, t.reasoning, t.prompt+t.completion)
}

// responseObject is the Response; output and usage are raw JSON.
func (x *exchange) responseObject(status, reason, output, usage string) []byte {
	b := []byte(`{"id":"","object":"response","created_at":0,"status":"","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":"","output":[],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":true,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}`)
	b = set(b, "id", fmt.Sprintf("resp_fake_%d", x.id))
	b = set(b, "created_at", x.created())
	b = set(b, "status", status)
	b = set(b, "model", x.route.respModel)
	if m := gjson.GetBytes(x.body, "max_output_tokens"); m.Type == gjson.Number {
		b = set(b, "max_output_tokens", m.Int())
	}
	if reason != "" {
		b = setRaw(b, "incomplete_details", string(set([]byte(`{"reason":""}`), "reason", reason)))
	}
	b = setRaw(b, "output", output)
	return setRaw(b, "usage", usage)
}

// outputItem is the output item holding what was sent: a message with one output_text
// part, or a function_call.
func (x *exchange) outputItem(sent []string, status string) string {
	joined := strings.Join(sent, "")
	if tc := x.content.ToolCall; tc != nil {
		b := []byte(`{"id":"","type":"function_call","status":"","call_id":"","name":"","arguments":""}`)
		b = set(b, "id", x.itemID())
		b = set(b, "status", status)
		b = set(b, "call_id", x.callID())
		b = set(b, "name", tc.Name)
		return string(set(b, "arguments", joined))
	}
	b := []byte(`{"id":"","type":"message","status":"","role":"assistant","content":[]}`)
	b = set(b, "id", x.itemID())
	b = set(b, "status", status)
	if status != "in_progress" {
		b = setRaw(b, "content", "["+outputTextPart(joined)+"]")
	}
	return string(b)
}

func outputTextPart(text string) string {
	return string(set([]byte(`{"type":"output_text","text":"","annotations":[],"logprobs":[]}`), "text", text))
}

// responsesStream emits named events whose data repeats the name in "type" and carries an
// increasing sequence_number (wire-formats §2.1).
type responsesStream struct {
	x   *exchange
	seq int
}

func (r *responsesStream) ev(typ string, fields ...string) sseEvent {
	b := set([]byte(`{"type":""}`), "type", typ)
	b = set(b, "sequence_number", r.seq)
	r.seq++
	for i := 0; i+1 < len(fields); i += 2 {
		b = setRaw(b, fields[i], fields[i+1])
	}
	return event(typ, b)
}

// quote is s as a JSON string literal.
func quote(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("fakeprovider: quote: %v", err))
	}
	return string(b)
}

func (r *responsesStream) head() []sseEvent {
	x := r.x
	open := string(x.responseObject("in_progress", "", "[]", "null"))
	evs := []sseEvent{
		r.ev("response.created", "response", open),
		r.ev("response.in_progress", "response", open),
		r.ev("response.output_item.added", "output_index", "0", "item", x.outputItem(nil, "in_progress")),
	}
	if x.content.ToolCall == nil {
		evs = append(evs, r.ev("response.content_part.added", "item_id", quote(x.itemID()),
			"output_index", "0", "content_index", "0", "part", outputTextPart("")))
	}
	return evs
}

func (r *responsesStream) piece(_ int, p string) []sseEvent {
	id := quote(r.x.itemID())
	if r.x.content.ToolCall != nil {
		return []sseEvent{r.ev("response.function_call_arguments.delta", "item_id", id, "output_index", "0", "delta", quote(p))}
	}
	return []sseEvent{r.ev("response.output_text.delta", "item_id", id, "output_index", "0",
		"content_index", "0", "delta", quote(p), "logprobs", "[]")}
}

func (r *responsesStream) tail(o outcome, sent []string, terminal bool) []sseEvent {
	x := r.x
	id, joined := quote(x.itemID()), strings.Join(sent, "")
	status, reason := responseStatus(o)
	var evs []sseEvent
	if x.content.ToolCall != nil {
		evs = append(evs, r.ev("response.function_call_arguments.done", "item_id", id, "output_index", "0", "arguments", quote(joined)))
	} else {
		evs = append(evs,
			r.ev("response.output_text.done", "item_id", id, "output_index", "0", "content_index", "0",
				"text", quote(joined), "logprobs", "[]"),
			r.ev("response.content_part.done", "item_id", id, "output_index", "0", "content_index", "0",
				"part", outputTextPart(joined)))
	}
	item := x.outputItem(sent, status)
	evs = append(evs, r.ev("response.output_item.done", "output_index", "0", "item", item))
	if !terminal {
		return evs
	}
	// Usage appears only in the terminal response object (wire-formats §2.1).
	final := string(x.responseObject(status, reason, "["+item+"]", responsesUsage(x.content.usage(len(sent)))))
	name := "response.completed"
	if status == "incomplete" {
		name = "response.incomplete"
	}
	return append(evs, r.ev(name, "response", final))
}

// inband is either "event: error" in the nested wire shape
// {"type":"error","sequence_number":N,"error":{type,code,message,param}} or the terminal
// response.failed with response.error{code,message} (wire-formats §2.2).
func (r *responsesStream) inband(e apiError, failed, raw bool) []sseEvent {
	if raw {
		return []sseEvent{event("error", e.body)}
	}
	errObj := gjson.GetBytes(e.body, "error")
	if !failed {
		return []sseEvent{r.ev("error", "error", errObj.Raw)}
	}
	code := errObj.Get("code").String()
	if code == "" {
		code = errObj.Get("type").String()
	}
	if code == "" {
		code = "server_error"
	}
	respErr := set([]byte(`{"code":""}`), "code", code)
	respErr = set(respErr, "message", errObj.Get("message").String())
	resp := r.x.responseObject("failed", "", "[]", "null")
	resp = setRaw(resp, "error", string(respErr))
	return []sseEvent{r.ev("response.failed", "response", string(resp))}
}
