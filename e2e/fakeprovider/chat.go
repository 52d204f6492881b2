package fakeprovider

import (
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// chat answers Chat Completions for OpenAI and Azure (wire-formats §1, §4).
func (x *exchange) chat() {
	pieces, o := x.plan(x.maxTokens("max_completion_tokens", "max_tokens"))
	if x.route.stream {
		x.stream(x.newChatStream(), pieces, o)
		return
	}
	x.sendResult(pieces, o, x.chatCompletion)
}

func (x *exchange) azure() bool { return x.s.opts.Kind == Azure }

func (x *exchange) chatID() string { return fmt.Sprintf("chatcmpl-fake-%d", x.id) }

func (x *exchange) callID() string { return fmt.Sprintf("call_fake_%d", x.id) }

// finishReason maps an outcome to Chat's finish_reason (wire-formats §1.2).
func (x *exchange) finishReason(o outcome) string {
	switch o {
	case outcomeLength:
		return "length"
	case outcomeFiltered:
		return "content_filter"
	}
	if x.content.ToolCall != nil {
		return "tool_calls"
	}
	return "stop"
}

// chatUsage is Chat's usage object; prompt_tokens includes the cached tokens and
// completion_tokens the reasoning tokens (wire-formats §6).
func chatUsage(t tokens) string {
	return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,`+
		`"prompt_tokens_details":{"cached_tokens":%d,"audio_tokens":0},`+
		`"completion_tokens_details":{"reasoning_tokens":%d,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`,
		t.prompt, t.completion, t.prompt+t.completion, t.cached, t.reasoning)
}

// Azure's content-filter annotations (wire-formats §4.2): every category "safe", and the
// sample of a filtered completion.
const (
	azureSafeResults = `{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},` +
		`"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}`
	azureFilteredResults = `{"protected_material_text":{"detected":true,"filtered":true}}`
	azurePromptResults   = `[{"prompt_index":0,"content_filter_results":` + azureSafeResults + `}]`
)

// chatCompletion is the non-streaming chat.completion object.
func (x *exchange) chatCompletion(sent []string, o outcome) []byte {
	b := []byte(`{"id":"","object":"chat.completion","created":0,"model":"","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":""}],"usage":{},"system_fingerprint":"fp_fake"}`)
	b = set(b, "id", x.chatID())
	b = set(b, "created", x.created())
	b = set(b, "model", x.route.respModel)
	b = set(b, "choices.0.finish_reason", x.finishReason(o))
	joined := strings.Join(sent, "")
	if tc := x.content.ToolCall; tc != nil {
		call := []byte(`{"id":"","type":"function","function":{"name":"","arguments":""}}`)
		call = set(call, "id", x.callID())
		call = set(call, "function.name", tc.Name)
		call = set(call, "function.arguments", joined)
		b = setRaw(b, "choices.0.message.tool_calls", "["+string(call)+"]")
	} else if len(sent) > 0 || o != outcomeFiltered {
		b = set(b, "choices.0.message.content", joined)
	}
	b = setRaw(b, "usage", chatUsage(x.content.usage(len(sent))))
	if x.azure() {
		// Azure annotates the prompt and each choice (wire-formats §4.2).
		b = setRaw(b, "prompt_filter_results", azurePromptResults)
		results := azureSafeResults
		if o == outcomeFiltered {
			results = azureFilteredResults
		}
		b = setRaw(b, "choices.0.content_filter_results", results)
	} else {
		b = set(b, "service_tier", "default")
	}
	return b
}

// chatStream emits chat.completion.chunk events (wire-formats §1.2, Azure quirks §4.2).
type chatStream struct {
	x            *exchange
	includeUsage bool
	obfuscate    bool
}

func (x *exchange) newChatStream() *chatStream {
	include := gjson.GetBytes(x.body, "stream_options.include_usage").Bool()
	switch x.f().Usage {
	case UsageOn:
		include = true
	case UsageOff:
		include = false
	}
	return &chatStream{
		x:            x,
		includeUsage: include,
		// OpenAI pads chunks with "obfuscation" unless
		// stream_options.include_obfuscation is false (wire-formats §1.1).
		obfuscate: !x.azure() && gjson.GetBytes(x.body, "stream_options.include_obfuscation").Type != gjson.False,
	}
}

// chunk frames choices (raw JSON) as a chunk. With include_usage every chunk but the last
// carries "usage":null (wire-formats §1.1).
func (c *chatStream) chunk(choices string) sseEvent {
	b := []byte(`{"id":"","object":"chat.completion.chunk","created":0,"model":"","system_fingerprint":"fp_fake","choices":[]}`)
	b = set(b, "id", c.x.chatID())
	b = set(b, "created", c.x.created())
	b = set(b, "model", c.x.route.respModel)
	b = setRaw(b, "choices", choices)
	if c.includeUsage {
		b = setRaw(b, "usage", "null")
	}
	if c.obfuscate {
		b = set(b, "obfuscation", "fakepad")
	}
	return data(b)
}

// choice builds one streaming choice. Azure adds content_filter_results to each: the
// per-category verdicts on content deltas, {} elsewhere (wire-formats §4.2).
func (c *chatStream) choice(delta, finish, azureResults string) string {
	b := []byte(`{"index":0,"delta":{},"logprobs":null,"finish_reason":null}`)
	b = setRaw(b, "delta", delta)
	if finish != "" {
		b = set(b, "finish_reason", finish)
	}
	if c.x.azure() {
		b = setRaw(b, "content_filter_results", azureResults)
	}
	return "[" + string(b) + "]"
}

func (c *chatStream) head() []sseEvent {
	var evs []sseEvent
	if c.x.azure() {
		// Azure's first event is a prompt annotation with empty id/model/object and
		// "choices":[] — not a usage chunk (wire-formats §4.2, §7).
		b := []byte(`{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[]}`)
		b = setRaw(b, "prompt_filter_results", azurePromptResults)
		if c.includeUsage {
			b = setRaw(b, "usage", "null")
		}
		evs = append(evs, data(b))
	}
	tc := c.x.content.ToolCall
	if tc == nil {
		return append(evs, c.chunk(c.choice(`{"role":"assistant","content":"","refusal":null}`, "", "{}")))
	}
	evs = append(evs, c.chunk(c.choice(`{"role":"assistant","content":null,"refusal":null}`, "", "{}")))
	// The first tool-call delta carries id, type and name with empty arguments
	// (wire-formats §1.2 sample).
	call := []byte(`{"tool_calls":[{"index":0,"id":"","type":"function","function":{"name":"","arguments":""}}]}`)
	call = set(call, "tool_calls.0.id", c.x.callID())
	call = set(call, "tool_calls.0.function.name", tc.Name)
	return append(evs, c.chunk(c.choice(string(call), "", "{}")))
}

func (c *chatStream) piece(_ int, p string) []sseEvent {
	if c.x.content.ToolCall != nil {
		d := set([]byte(`{"tool_calls":[{"index":0,"function":{"arguments":""}}]}`), "tool_calls.0.function.arguments", p)
		return []sseEvent{c.chunk(c.choice(string(d), "", "{}"))}
	}
	return []sseEvent{c.chunk(c.choice(string(set([]byte(`{"content":""}`), "content", p)), "", azureSafeResults))}
}

func (c *chatStream) tail(o outcome, sent []string, terminal bool) []sseEvent {
	var evs []sseEvent
	if o == outcomeFiltered && c.x.azure() {
		// Azure's filtered choice carries content_filter_results and no delta
		// (wire-formats §4.2 sample).
		choice := `[{"index":0,"finish_reason":"content_filter","content_filter_results":` + azureFilteredResults + `}]`
		evs = append(evs, c.chunk(choice))
	} else if c.x.f().End == EndNoStopReason {
		evs = append(evs, c.chunk(c.choice("{}", "", "{}"))) // "finish_reason":null
	} else {
		evs = append(evs, c.chunk(c.choice("{}", c.x.finishReason(o), "{}")))
	}
	if c.includeUsage {
		// The usage chunk has "choices":[] and non-null usage (wire-formats §1.2).
		ev := c.chunk("[]")
		ev.data = setRaw(ev.data, "usage", chatUsage(c.x.content.usage(len(sent))))
		evs = append(evs, ev)
	}
	if terminal {
		evs = append(evs, data([]byte("[DONE]")))
	}
	return evs
}

// inband is a data-only event with a top-level "error" and no choices, then [DONE]
// (wire-formats §1.3; openai-go packages/ssestream/ssestream.go turns it into a
// StreamError).
func (c *chatStream) inband(e apiError, _, _ bool) []sseEvent {
	return []sseEvent{data(e.body), data([]byte("[DONE]"))}
}

func set(b []byte, path string, v any) []byte {
	out, err := sjson.SetBytes(b, path, v)
	if err != nil {
		panic(fmt.Sprintf("fakeprovider: sjson set %s: %v", path, err))
	}
	return out
}

func setRaw(b []byte, path, raw string) []byte {
	out, err := sjson.SetRawBytes(b, path, []byte(raw))
	if err != nil {
		panic(fmt.Sprintf("fakeprovider: sjson set %s: %v", path, err))
	}
	return out
}
