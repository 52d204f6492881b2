// Package sse is an incremental parser of server-sent events (the WHATWG "event stream"
// format) for response bodies that arrive in chunks which do not align with events, as
// Envoy's ext_proc body chunks do not (issue 10, "Frames, not chunks").
//
// The parser splits the stream into blocks, each ending with its blank line, and hands every
// block to the caller with its original bytes (Event.Raw): concatenating the Raw of every
// block reproduces the input exactly, so the caller can pass the bytes on unchanged, hold
// them, or drop one event (the usage chunk the client did not ask for). Only the bytes of the
// incomplete block at the end of a chunk are kept between chunks; nothing is allocated per
// chunk once the two internal buffers have grown to the largest event (BenchmarkFeed).
//
// Framing follows the WHATWG algorithm as the SDKs read it (wire-formats §7; openai-go and
// anthropic-sdk-go packages/ssestream): lines end with CRLF, LF or CR; "field:value" drops one
// space after the colon; several data lines join with "\n"; a line starting with ':' is a
// comment (a keepalive); id and retry are ignored; a leading byte order mark is skipped.
package sse

import "bytes"

// Kind is what a block of the stream is.
type Kind uint8

const (
	// KindEvent is a dispatched event: the block has at least one data line.
	KindEvent Kind = iota + 1
	// KindComment is a block of comment lines and no data: keepalive activity, not an event
	// (": keepalive", OpenRouter's ": OPENROUTER PROCESSING", wire-formats §1.3).
	KindComment
	// KindEmpty is a block with neither data nor comments: stray blank lines, or an event,
	// id or retry line without data, which WHATWG does not dispatch.
	KindEmpty
)

// Event is one block of the stream. Its slices point into the chunk given to Feed or into
// the parser's buffers, and stay valid until the next call to Feed, Flush or Reset.
type Event struct {
	Kind Kind
	// Name is the value of the last "event:" line; empty when there was none (a data-only
	// Chat Completions event, wire-formats §1.2).
	Name []byte
	// Data is the data lines joined with "\n", without the final newline.
	Data []byte
	// Raw is the block's bytes as received, its terminating blank line included.
	Raw []byte
	// Comments is the number of comment lines in the block.
	Comments int
	// Unterminated: the stream ended (Flush) before the block's blank line.
	Unterminated bool
}

// Parser is an incremental SSE parser. The zero value is ready to use; a Parser is not safe
// for concurrent use.
type Parser struct {
	// tail holds the incomplete block carried over from earlier chunks; spare is the other
	// buffer, which holds the previous Feed's joined block so that its Raw stays valid.
	tail, spare []byte
	// data holds the joined data of multi-line events of the current Feed.
	data []byte
	// midLine: the next byte does not start a line; afterCR: the last line ended with CR, so an
	// LF right after it belongs to the same line end; endCR: the block's blank line ended
	// with a CR at the end of the input, so whether an LF follows is not yet known.
	midLine, afterCR, endCR bool
	emitted                 bool // a block was emitted (only the first may start with a BOM)
	// ev is the Event handed to emit, kept here so that passing it does not allocate.
	ev Event
}

// Reset makes p ready for a new stream, keeping its buffers.
func (p *Parser) Reset() {
	*p = Parser{tail: p.tail[:0], spare: p.spare[:0], data: p.data[:0]}
}

// Pending is the number of bytes held for the incomplete block.
func (p *Parser) Pending() int { return len(p.tail) }

// Feed parses chunk and calls emit for every block that completes in it, in order. The
// Event passed to emit is reused: copy what must outlive the next Feed.
func (p *Parser) Feed(chunk []byte, emit func(*Event)) {
	p.data = p.data[:0]
	start := 0 // start of the current block in chunk, when it began in chunk
	i := 0
	if len(p.tail) > 0 {
		// The block began in an earlier chunk: find its end in chunk, then join.
		end, ok := p.scan(chunk, 0)
		if !ok {
			p.tail = append(p.tail, chunk...)
			return
		}
		joined := append(p.tail, chunk[:end]...)
		p.tail, p.spare = p.spare[:0], joined
		p.emitBlock(joined, false, emit)
		start, i = end, end
	}
	for i < len(chunk) {
		end, ok := p.scan(chunk, i)
		if !ok {
			break
		}
		p.emitBlock(chunk[start:end], false, emit)
		start, i = end, end
	}
	if start < len(chunk) {
		p.tail = append(p.tail[:0], chunk[start:]...)
	}
}

// Flush ends the stream: an incomplete block still held is emitted with Unterminated set
// (a final event without its blank line). The parser is then reset.
func (p *Parser) Flush(emit func(*Event)) {
	p.data = p.data[:0]
	if len(p.tail) > 0 {
		raw := p.tail
		p.emitBlock(raw, !p.endCR, emit)
	}
	p.Reset()
}

// scan looks for the end of the current block in b from i, continuing the line state. It
// returns the offset just past the block's blank line.
func (p *Parser) scan(b []byte, i int) (int, bool) {
	if p.endCR {
		// The blank line ended with CR at the end of the previous chunk: an LF here is part
		// of it.
		if len(b) == 0 {
			return 0, false
		}
		p.endCR = false
		if b[0] == '\n' {
			return 1, true
		}
		return 0, true
	}
	for ; i < len(b); i++ {
		c := b[i]
		if p.afterCR {
			p.afterCR = false
			if c == '\n' {
				continue
			}
		}
		if c != '\n' && c != '\r' {
			p.midLine = true
			continue
		}
		if p.midLine {
			p.midLine = false
			p.afterCR = c == '\r'
			continue
		}
		// A blank line: the block ends after its line end.
		if c == '\n' {
			return i + 1, true
		}
		if i+1 < len(b) {
			if b[i+1] == '\n' {
				return i + 2, true
			}
			return i + 1, true
		}
		// CR at the end of the input: hold the block until the next byte is known, so that
		// the block's bytes do not depend on where the chunks split.
		p.endCR = true
		return 0, false
	}
	return 0, false
}

// emitBlock parses one complete block and hands it to emit.
func (p *Parser) emitBlock(raw []byte, unterminated bool, emit func(*Event)) {
	p.ev = Event{Raw: raw, Unterminated: unterminated}
	ev := &p.ev
	body := raw
	if !p.emitted {
		p.emitted = true
		body = bytes.TrimPrefix(body, bom)
	}
	dataLines := 0
	dataStart := len(p.data)
	var first []byte
	for len(body) > 0 {
		line, rest := cutLine(body)
		body = rest
		if len(line) == 0 {
			continue
		}
		if line[0] == ':' {
			ev.Comments++
			continue
		}
		name, value := line, []byte(nil)
		if c := bytes.IndexByte(line, ':'); c >= 0 {
			name, value = line[:c], line[c+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(name) {
		case "event":
			ev.Name = value
		case "data":
			dataLines++
			switch dataLines {
			case 1:
				first = value
			case 2:
				p.data = append(p.data, first...)
				fallthrough
			default:
				p.data = append(p.data, '\n')
				p.data = append(p.data, value...)
			}
		}
	}
	switch {
	case dataLines == 1:
		ev.Data, ev.Kind = first[:len(first):len(first)], KindEvent
	case dataLines > 1:
		ev.Data, ev.Kind = p.data[dataStart:len(p.data):len(p.data)], KindEvent
	case ev.Comments > 0:
		ev.Kind = KindComment
	default:
		ev.Kind = KindEmpty
	}
	emit(ev)
}

var bom = []byte("\xEF\xBB\xBF")

// cutLine splits b after its first line end (CRLF, LF or CR), returning the line without it.
func cutLine(b []byte) (line, rest []byte) {
	for i, c := range b {
		switch c {
		case '\n':
			return b[:i], b[i+1:]
		case '\r':
			if i+1 < len(b) && b[i+1] == '\n' {
				return b[:i], b[i+2:]
			}
			return b[:i], b[i+1:]
		}
	}
	return b, nil
}
