package fakeprovider

import (
	"fmt"

	"github.com/tidwall/gjson"
)

// Content is the deterministic payload a fake returns. The text (or the tool-call
// arguments) is split into Chunks pieces; each piece is one SSE content event and counts
// as one completion token, so usage always agrees with what was streamed.
type Content struct {
	// Text is the assistant text. Default "Hello from the fake provider.".
	Text string
	// Chunks is how many pieces the text (or tool arguments) is split into, on rune
	// boundaries, as evenly as possible. It is capped at the rune count. Default 4.
	Chunks int
	// PromptTokens is the total input token count, cached tokens included (OpenAI's
	// prompt_tokens semantics, wire-formats §6). Default 12.
	PromptTokens int
	// CachedTokens is the part of PromptTokens served from the prompt cache. OpenAI
	// reports it in prompt_tokens_details.cached_tokens; Anthropic reports
	// input_tokens = PromptTokens-CachedTokens and cache_read_input_tokens = CachedTokens,
	// because there input_tokens excludes the cache (wire-formats §6).
	CachedTokens int
	// ReasoningTokens are added to the OpenAI/Azure completion token count and reported in
	// completion_tokens_details.reasoning_tokens (Responses: output_tokens_details). They
	// produce no output events. Ignored by Anthropic.
	ReasoningTokens int
	// ToolCall, when set, makes the assistant answer with one function/tool call instead of
	// text; its Arguments are what gets chunked.
	ToolCall *ToolCall
	// EmbeddingDims is the embedding length when the request has no "dimensions".
	// Default 8.
	EmbeddingDims int
}

// ToolCall is the single tool call a fake answers with when Content.ToolCall is set.
type ToolCall struct {
	// Name is the function/tool name. Default "get_weather".
	Name string
	// Arguments is the JSON object text of the arguments. Default {"city":"Paris"}.
	Arguments string
}

const (
	defaultText          = "Hello from the fake provider."
	defaultChunks        = 4
	defaultPromptTokens  = 12
	defaultEmbeddingDims = 8
	defaultToolName      = "get_weather"
	defaultToolArguments = `{"city":"Paris"}`
)

func (c Content) validate() error {
	if c.Chunks < 0 || c.PromptTokens < 0 || c.CachedTokens < 0 || c.ReasoningTokens < 0 || c.EmbeddingDims < 0 {
		return fmt.Errorf("content: negative count in %+v", c)
	}
	if c.CachedTokens > c.PromptTokens {
		return fmt.Errorf("content: CachedTokens %d > PromptTokens %d", c.CachedTokens, c.PromptTokens)
	}
	if c.ToolCall != nil && c.ToolCall.Arguments != "" && !gjson.Valid(c.ToolCall.Arguments) {
		return fmt.Errorf("content: tool arguments are not JSON: %q", c.ToolCall.Arguments)
	}
	return nil
}

// overlay returns c with every non-zero field of o replacing c's.
func (c Content) overlay(o Content) Content {
	if o.Text != "" {
		c.Text = o.Text
	}
	if o.Chunks != 0 {
		c.Chunks = o.Chunks
	}
	if o.PromptTokens != 0 {
		c.PromptTokens = o.PromptTokens
	}
	if o.CachedTokens != 0 {
		c.CachedTokens = o.CachedTokens
	}
	if o.ReasoningTokens != 0 {
		c.ReasoningTokens = o.ReasoningTokens
	}
	if o.ToolCall != nil {
		c.ToolCall = o.ToolCall
	}
	if o.EmbeddingDims != 0 {
		c.EmbeddingDims = o.EmbeddingDims
	}
	return c
}

// withDefaults fills the zero fields with the documented defaults.
func (c Content) withDefaults() Content {
	c = Content{
		Text:          defaultText,
		Chunks:        defaultChunks,
		PromptTokens:  defaultPromptTokens,
		EmbeddingDims: defaultEmbeddingDims,
	}.overlay(c)
	if c.ToolCall != nil {
		tc := *c.ToolCall
		if tc.Name == "" {
			tc.Name = defaultToolName
		}
		if tc.Arguments == "" {
			tc.Arguments = defaultToolArguments
		}
		c.ToolCall = &tc
	}
	return c
}

// pieces is the chunked text, or the chunked tool arguments when ToolCall is set.
func (c Content) pieces() []string {
	if c.ToolCall != nil {
		return split(c.ToolCall.Arguments, c.Chunks)
	}
	return split(c.Text, c.Chunks)
}

// split cuts s into n pieces on rune boundaries, as evenly as possible, earlier pieces
// taking the remainder. Concatenating the pieces gives s back.
func split(s string, n int) []string {
	runes := []rune(s)
	if n > len(runes) {
		n = len(runes)
	}
	if n <= 0 {
		return nil
	}
	out := make([]string, 0, n)
	size, extra := len(runes)/n, len(runes)%n
	for i, start := 0, 0; i < n; i++ {
		end := start + size
		if i < extra {
			end++
		}
		out = append(out, string(runes[start:end]))
		start = end
	}
	return out
}

// tokens is the usage of one exchange. completion counts the emitted pieces plus the
// reasoning tokens, which is what OpenAI's completion_tokens means (wire-formats §6).
type tokens struct {
	prompt, cached, completion, reasoning int
}

func (c Content) usage(emitted int) tokens {
	return tokens{
		prompt:     c.PromptTokens,
		cached:     c.CachedTokens,
		completion: emitted + c.ReasoningTokens,
		reasoning:  c.ReasoningTokens,
	}
}
