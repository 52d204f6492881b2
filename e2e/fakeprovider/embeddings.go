package fakeprovider

import (
	"encoding/base64"
	"encoding/binary"
	"hash/fnv"
	"math"
	"strconv"

	"github.com/tidwall/gjson"
)

// embeddings answers /v1/embeddings (OpenAI, Azure). Vectors are unit length and derived
// from a hash of each input, so the same input always embeds the same way. Usage reports
// Content.PromptTokens for the whole request.
func (x *exchange) embeddings() {
	f := x.f()
	if f.End == EndError || f.End == EndFailed {
		x.sendError(x.errorFor(x.inbandKind(), f))
		return
	}
	inputs := embeddingInputs(gjson.GetBytes(x.body, "input"))
	dims := x.content.EmbeddingDims
	if d := gjson.GetBytes(x.body, "dimensions"); d.Type == gjson.Number && d.Int() > 0 {
		dims = int(d.Int())
	}
	// openai-go sends encoding_format only when set; "base64" means little-endian
	// float32s, base64-encoded (openai-go embedding.go EmbeddingNewParamsEncodingFormat).
	b64 := gjson.GetBytes(x.body, "encoding_format").String() == "base64"
	b := []byte(`{"object":"list","data":[],"model":"","usage":{}}`)
	for i, in := range inputs {
		vec := embed(in, dims)
		item := []byte(`{"object":"embedding","index":0,"embedding":[]}`)
		item = set(item, "index", i)
		if b64 {
			item = set(item, "embedding", encodeFloats(vec))
		} else {
			item = set(item, "embedding", vec)
		}
		b = setRaw(b, "data.-1", string(item))
	}
	b = set(b, "model", x.route.respModel)
	p := x.content.PromptTokens
	b = setRaw(b, "usage", `{"prompt_tokens":`+strconv.Itoa(p)+`,"total_tokens":`+strconv.Itoa(p)+`}`)
	x.writeBody(200, "application/json", b, nil)
}

// embeddingInputs splits "input": a string, an array of strings, a token array (one
// input) or an array of token arrays.
func embeddingInputs(in gjson.Result) []string {
	if !in.IsArray() {
		return []string{in.String()}
	}
	arr := in.Array()
	if len(arr) > 0 && arr[0].Type == gjson.Number {
		return []string{in.Raw}
	}
	out := make([]string, len(arr))
	for i, v := range arr {
		if v.IsArray() {
			out[i] = v.Raw
		} else {
			out[i] = v.String()
		}
	}
	return out
}

func embed(input string, dims int) []float32 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(input))
	state := h.Sum64() | 1
	vec := make([]float32, dims)
	var norm float64
	for i := range vec {
		// xorshift64: a deterministic stream of values seeded by the input.
		state ^= state << 13
		state ^= state >> 7
		state ^= state << 17
		v := float64(state>>11)/float64(1<<53)*2 - 1
		vec[i] = float32(v)
		norm += v * v
	}
	if norm > 0 {
		n := float32(math.Sqrt(norm))
		for i := range vec {
			vec[i] /= n
		}
	}
	return vec
}

func encodeFloats(vec []float32) string {
	buf := make([]byte, 4*len(vec))
	for i, v := range vec {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
	}
	return base64.StdEncoding.EncodeToString(buf)
}
