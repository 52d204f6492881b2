package extproc

import (
	"github.com/tidwall/gjson"
)

// usage is what a provider reported it used (SPEC §3.2 TPM, §3.4 throughput).
type usage struct{ prompt, completion, total int64 }

// usageOf reads the usage of a JSON response in any of the dialects: OpenAI chat
// (prompt_tokens/completion_tokens/total_tokens), Responses (input_tokens/output_tokens/
// total_tokens), Anthropic messages (input_tokens/output_tokens, no total) and embeddings
// (prompt_tokens/total_tokens).
func usageOf(body []byte) usage {
	u := gjson.GetBytes(body, "usage")
	if !u.IsObject() {
		return usage{}
	}
	r := usage{
		prompt:     firstInt(u, "prompt_tokens", "input_tokens"),
		completion: firstInt(u, "completion_tokens", "output_tokens"),
		total:      u.Get("total_tokens").Int(),
	}
	if r.total == 0 {
		r.total = r.prompt + r.completion
	}
	return r
}

func firstInt(u gjson.Result, names ...string) int64 {
	for _, n := range names {
		if v := u.Get(n); v.Exists() {
			return v.Int()
		}
	}
	return 0
}
