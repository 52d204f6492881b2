package stream

import (
	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
)

// Usage is what the provider reported it used, collected across frames (behaviour §3.2 TPM,
// §3.4 throughput; wire-formats §6).
type Usage struct {
	// Prompt counts every input token: OpenAI prompt_tokens / Responses input_tokens
	// (cache included), Anthropic input_tokens + cache_creation_input_tokens +
	// cache_read_input_tokens (Anthropic's input_tokens excludes the cache, §6).
	Prompt int64
	// Completion is completion_tokens / output_tokens (reasoning included).
	Completion int64
	// Total is total_tokens, or Prompt + Completion where the provider sends none
	// (Anthropic).
	Total int64
	// Reported: a usage object was seen.
	Reported bool
}

// setOpenAI reads an OpenAI usage object: Chat's prompt_tokens/completion_tokens or
// Responses' input_tokens/output_tokens, with total_tokens. The latest report wins.
func (u *Usage) setOpenAI(v gjson.Result) {
	if !v.IsObject() {
		return
	}
	var p, c, t int64
	v.ForEach(func(k, x gjson.Result) bool {
		switch k.Raw {
		case `"prompt_tokens"`, `"input_tokens"`:
			p = x.Int()
		case `"completion_tokens"`, `"output_tokens"`:
			c = x.Int()
		case `"total_tokens"`:
			t = x.Int()
		}
		return true
	})
	if t == 0 {
		t = p + c
	}
	*u = Usage{Prompt: p, Completion: c, Total: t, Reported: true}
}

// mergeAnthropic reads an Anthropic usage object: message_start's, then message_delta's,
// whose counts are cumulative and overwrite (anthropic-sdk-go Message.Accumulate). Input
// counts of 0 in a later report do not erase earlier ones: compatible gateways send
// input_tokens 0 in message_start and the real count in message_delta (wire-formats §3.2).
func (u *Usage) mergeAnthropic(v gjson.Result, in *anthropicInput) {
	if !v.IsObject() {
		return
	}
	v.ForEach(func(k, x gjson.Result) bool {
		switch k.Raw {
		case `"input_tokens"`:
			in.input = keep(in.input, x)
		case `"cache_creation_input_tokens"`:
			in.cacheCreation = keep(in.cacheCreation, x)
		case `"cache_read_input_tokens"`:
			in.cacheRead = keep(in.cacheRead, x)
		case `"output_tokens"`:
			u.Completion = x.Int()
		}
		return true
	})
	u.Prompt = in.input + in.cacheCreation + in.cacheRead
	u.Total = u.Prompt + u.Completion
	u.Reported = true
}

// anthropicInput holds Anthropic's input counts across message_start and message_delta.
type anthropicInput struct{ input, cacheCreation, cacheRead int64 }

func keep(old int64, x gjson.Result) int64 {
	if n := x.Int(); n != 0 {
		return n
	}
	return old
}

// UsageOf reads the usage of a whole JSON response in dialect d (a Chat completion, a
// Responses object, an Anthropic message or an embeddings list), with the same rules as the
// streams', so JSON and streamed attempts count tokens alike.
func UsageOf(d dialect.Dialect, body []byte) Usage {
	var u Usage
	v := gjson.GetBytes(body, "usage")
	if d == dialect.Messages {
		var in anthropicInput
		u.mergeAnthropic(v, &in)
		return u
	}
	u.setOpenAI(v)
	return u
}
