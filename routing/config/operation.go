package config

import "fmt"

// Operation is a kind of upstream work with its own execution policy (behaviour §6.2).
type Operation uint8

const (
	OpText Operation = iota
	OpImages
	OpAudio
	OpEmbeddings
	OpRerank
	OpVideo
	OpVideoDownload
	numOperations
)

// Operations lists every operation, in matrix order.
func Operations() []Operation {
	return []Operation{OpText, OpImages, OpAudio, OpEmbeddings, OpRerank, OpVideo, OpVideoDownload}
}

// String is the operation's key in executionPolicies.
func (o Operation) String() string {
	switch o {
	case OpText:
		return "text"
	case OpImages:
		return "images"
	case OpAudio:
		return "audio"
	case OpEmbeddings:
		return "embeddings"
	case OpRerank:
		return "rerank"
	case OpVideo:
		return "video"
	case OpVideoDownload:
		return "videoDownload"
	default:
		return fmt.Sprintf("operation(%d)", o)
	}
}

// ParseOperation maps an executionPolicies key to its Operation.
func ParseOperation(s string) (Operation, bool) {
	for _, o := range Operations() {
		if o.String() == s {
			return o, true
		}
	}
	return 0, false
}

// Mode is how the response is delivered: one JSON body or a stream.
type Mode uint8

const (
	ModeJSON Mode = iota
	ModeStream
	numModes
)

func (m Mode) String() string {
	if m == ModeStream {
		return "stream"
	}
	return "json"
}

// Cell is the mode whose matrix cell serves o in mode m: m itself, or, for a stream of a
// JSON-only operation (or the reverse), the operation's one cell.
func (o Operation) Cell(m Mode) Mode {
	if !o.HasMode(m) {
		return 1 - m
	}
	return m
}

// HasMode reports whether the operation exists in that mode, i.e. whether the matrix has a
// cell for it. Embeddings, reranking and video submit/update/delete answer JSON only; a video
// download is always a byte stream (behaviour §6.2).
func (o Operation) HasMode(m Mode) bool {
	switch o {
	case OpEmbeddings, OpRerank, OpVideo:
		return m == ModeJSON
	case OpVideoDownload:
		return m == ModeStream
	default:
		return o < numOperations && m < numModes
	}
}
