package dialect

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/routing/config"
)

// The prompt-size estimate (routing.Facts.PromptTokens) is deliberately cheap, since it is
// only compared with context windows (SPEC §9.2) and never billed:
//
//	tokens = ceil(textBytes / BytesPerToken) + mediaParts × MediaPartTokens + tokenIDs
//
// textBytes is the length of the raw JSON of the prompt fields (messages, system,
// instructions, input) and of the tool definitions, minus the raw length of every media
// part (an image's base64 would otherwise count as hundreds of thousands of tokens). JSON
// punctuation and escapes count as text: the estimate errs a little high, which is the
// safe side for a context-window check. Embeddings given as token ids count one each.
const (
	// BytesPerToken is the usual figure for English text with OpenAI's and Anthropic's
	// tokenizers.
	BytesPerToken = 4
	// MediaPartTokens is what one image, audio clip or document part is counted as: about
	// a one-megapixel image (OpenAI's high-detail 1024², Anthropic's ~1.15 MP at
	// w·h/750). Large documents count more in reality; the estimate is a floor for them.
	MediaPartTokens = 1024
)

// maxPartDepth bounds the walk into nested content (a message's content parts, an
// Anthropic tool_result's blocks, a Responses function_call_output's output).
const maxPartDepth = 4

// walker sums the prompt's size and finds its media parts.
type walker struct {
	dialect    Dialect
	text       int // bytes
	media      int64
	tokenIDs   int64
	modalities config.Modality
}

func (w *walker) tokens() int64 {
	n := (int64(max(w.text, 0)) + BytesPerToken - 1) / BytesPerToken
	return min(n+w.media*MediaPartTokens+w.tokenIDs, maxTokenCount)
}

// prompt adds one prompt field.
func (w *walker) prompt(v gjson.Result) {
	if w.dialect == Embeddings {
		w.embeddingInput(v)
		return
	}
	w.text += len(v.Raw)
	if v.IsArray() && w.mayHoldMedia(v.Raw) {
		w.parts(v, 0)
	}
}

// mayHoldMedia reports whether raw contains one of the dialect's media part types as a
// JSON string token. A substring search is several times cheaper than walking every
// message, and most prompts are text only. A type name written with \u escapes is not
// seen; such a request only loses its modality check, and the provider refuses what it
// cannot read.
func (w *walker) mayHoldMedia(raw string) bool {
	var types []string
	switch w.dialect {
	case Chat:
		types = []string{`"image_url"`, `"input_audio"`, `"file"`}
	case Responses:
		types = []string{`"input_image"`, `"input_file"`, `"input_audio"`}
	case Messages:
		types = []string{`"image"`, `"document"`}
	}
	for _, t := range types {
		if strings.Contains(raw, t) {
			return true
		}
	}
	return false
}

// parts walks an array of messages, items, content parts or blocks.
func (w *walker) parts(arr gjson.Result, depth int) {
	if depth >= maxPartDepth {
		return
	}
	arr.ForEach(func(_, el gjson.Result) bool {
		if !el.IsObject() {
			return true
		}
		// One pass over the element's keys (three Gets would scan it three times).
		var typ string
		var nested [2]gjson.Result
		el.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "type":
				typ = v.Str
			case "content":
				nested[0] = v
			case "output":
				nested[1] = v
			}
			return true
		})
		if m := w.mediaKind(typ); m != 0 {
			w.modalities |= m
			w.media++
			w.text -= len(el.Raw)
			return true
		}
		for _, c := range nested {
			if c.IsArray() {
				w.parts(c, depth+1)
			}
		}
		return true
	})
}

// mediaKind is the modality of a content part type in the walker's dialect, 0 for text and
// everything else. Documents (PDF) count as images: both providers read them as page images
// and need a vision-capable model for them.
func (w *walker) mediaKind(t string) config.Modality {
	switch w.dialect {
	case Chat: // content parts: text, image_url, input_audio, file
		switch t {
		case "image_url", "file":
			return config.ModalityImage
		case "input_audio":
			return config.ModalityAudio
		}
	case Responses: // input_text, input_image, input_file, input_audio
		switch t {
		case "input_image", "input_file":
			return config.ModalityImage
		case "input_audio":
			return config.ModalityAudio
		}
	case Messages: // text, image, document, tool_use, tool_result (nested blocks)
		switch t {
		case "image", "document":
			return config.ModalityImage
		}
	}
	return 0
}

// embeddingInput sizes an embeddings input: a string, strings, token ids or arrays of them.
func (w *walker) embeddingInput(v gjson.Result) {
	switch {
	case v.Type == gjson.String:
		w.text += len(v.Str)
	case v.Type == gjson.Number:
		w.tokenIDs++
	case v.IsArray():
		v.ForEach(func(_, el gjson.Result) bool {
			switch {
			case el.Type == gjson.String:
				w.text += len(el.Str)
			case el.Type == gjson.Number:
				w.tokenIDs++
			case el.IsArray():
				el.ForEach(func(_, id gjson.Result) bool {
					w.tokenIDs++
					return true
				})
			}
			return true
		})
	}
}
