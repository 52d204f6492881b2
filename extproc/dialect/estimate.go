package dialect

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/internal/rawjson"
	"github.com/switchyard-gw/switchyard/routing/config"
)

// The prompt-size estimate (routing.Facts.PromptTokens) is deliberately cheap, since it is
// only compared with context windows (behaviour §9.2) and never billed:
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

// prompt adds one prompt field, given its raw JSON.
func (w *walker) prompt(raw string) {
	if w.dialect == Embeddings {
		w.embeddingInput(gjson.Parse(raw))
		return
	}
	w.text += len(raw)
	if strings.HasPrefix(raw, "[") && w.mayHoldMedia(raw) {
		w.parts(raw, 0)
	}
}

// mediaPart is a content part type that carries media, and its modality.
type mediaPart struct {
	typ      string
	modality config.Modality
}

// mediaParts are each dialect's media part types, the one list both the walk (mediaKind)
// and its pre-check (mayHoldMedia) read. Documents (PDF) count as images: both providers
// read them as page images and need a vision-capable model for them.
var mediaParts = [...][]mediaPart{
	// content parts: text, image_url, input_audio, file
	Chat: {{"image_url", config.ModalityImage}, {"file", config.ModalityImage}, {"input_audio", config.ModalityAudio}},
	// input_text, input_image, input_file, input_audio
	Responses: {{"input_image", config.ModalityImage}, {"input_file", config.ModalityImage}, {"input_audio", config.ModalityAudio}},
	// text, image, document, tool_use, tool_result (nested blocks)
	Messages: {{"image", config.ModalityImage}, {"document", config.ModalityImage}},
}

// mediaTypes are the walker's dialect's media part types.
func (w *walker) mediaTypes() []mediaPart {
	if int(w.dialect) < len(mediaParts) {
		return mediaParts[w.dialect]
	}
	return nil
}

// mediaKind is the modality of a content part type in the walker's dialect, 0 for text and
// everything else.
func (w *walker) mediaKind(t string) config.Modality {
	for _, p := range w.mediaTypes() {
		if p.typ == t {
			return p.modality
		}
	}
	return 0
}

// mediaStarts[d] marks the first bytes of d's media part types (derived from mediaParts):
// most quotes in a prompt are followed by none of them.
var mediaStarts = func() (m [len(mediaParts)][256]bool) {
	for d, parts := range mediaParts {
		for _, p := range parts {
			m[d][p.typ[0]] = true
		}
	}
	return m
}()

// mayHoldMedia reports whether raw contains one of the dialect's media part types as a
// JSON string ("image_url" with its quotes; as a key too, or after an escaped quote: such
// false positives only cost a walk). Most prompts are text only, and this is several times
// cheaper than the walk. It reads raw once, from quote to quote, rather than once per type:
// '"' is the commonest byte of JSON, and a substring search for a needle that starts with
// it stops at every one. A type name written with \u escapes is not seen; such a request
// only loses its modality check, and the provider refuses what it cannot read.
func (w *walker) mayHoldMedia(raw string) bool {
	parts := w.mediaTypes()
	if len(parts) == 0 {
		return false
	}
	starts := &mediaStarts[w.dialect]
	for {
		q := strings.IndexByte(raw, '"')
		if q < 0 {
			return false
		}
		raw = raw[q+1:]
		if raw == "" || !starts[raw[0]] {
			continue
		}
		for _, p := range parts {
			if n := len(p.typ); len(raw) > n && raw[n] == '"' && raw[:n] == p.typ {
				return true
			}
		}
	}
}

// parts walks raw, a JSON array of messages, items, content parts or blocks.
func (w *walker) parts(raw string, depth int) {
	if depth >= maxPartDepth {
		return
	}
	for i := 1; i < len(raw); { // raw[0] is '['
		switch c := raw[i]; {
		case c == '{':
			i = w.element(raw, i, depth)
		case rawjson.IsSpace(c) || c == ',' || c == ']':
			i++
		default:
			if i = rawjson.SkipValue(raw, i); i < 0 {
				return // malformed, which validJSON rules out
			}
		}
	}
}

// element walks the object at raw[i], an element of an array at depth, and returns the
// index after it. It reads the object once, with members: gjson's ForEach over the array
// and then over the element would read it twice, and unescape every string in it (the
// text), when only the types are read.
func (w *walker) element(raw string, i, depth int) int {
	start := i
	var typ string
	var nested [2]string // content, output
	i = members(raw, i, func(key, v string) bool {
		switch key { // the last of duplicate keys wins, as it did over ForEach
		case "type":
			typ = stringValue(v)
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
		w.text -= i - start // media bytes are not text
		return i
	}
	for _, c := range nested {
		if strings.HasPrefix(c, "[") {
			w.parts(c, depth+1)
		}
	}
	return i
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
