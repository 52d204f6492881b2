package stream

import (
	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/extproc/sse"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

// Options configures a Classifier for one attempt.
type Options struct {
	// Provider is the deployment's provider, passed on in in-band error Outcomes (it picks
	// the status of an in-band overload).
	Provider failure.Provider
	// ClientUsage: the client asked for usage itself (Chat stream_options.include_usage).
	// Otherwise the usage chunk the gateway asked for is dropped (Verdict.Drop).
	ClientUsage bool
	// Model is the public model the client's events name in place of the provider's
	// (model.go); empty leaves the events as the provider sent them.
	Model string
}

// Verdict is what one event means for the attempt. The zero Verdict passes the event on.
type Verdict struct {
	// Output: the event carries output (content, reasoning, refusal, tool call): it commits
	// the stream (behaviour §8.2).
	Output bool
	// First: the first event with Output — the commit point and the time to first token.
	First bool
	// Error: an in-band error (behaviour §8.5); Classifier.Outcome has what to classify.
	Error bool
	// Drop: do not pass the event to the client (the hidden usage chunk).
	Drop bool
	// Final: the event where unified_routing goes (behaviour §10.1); Classifier.AppendFinal
	// rewrites it. Never set once an in-band error was seen.
	Final bool
	// End: the protocol's end marker ([DONE], response.completed or .incomplete,
	// message_stop).
	End bool
	// Malformed: the data is neither JSON nor a known sentinel. SDKs fail on it
	// (json.Unmarshal in openai-go and anthropic-sdk-go packages/ssestream).
	Malformed bool
}

// maxChoices bounds the choices whose completion is tracked (the request's n). Indices
// beyond it are still classified for output; a stream using them is judged by [DONE].
const maxChoices = 128

type choiceState struct {
	seen, finished, tools bool
}

// Classifier follows one streamed response. The zero value is not usable: call New or
// Reset. A Classifier is not safe for concurrent use.
type Classifier struct {
	d    dialect.Dialect
	opts Options

	committed bool
	failed    bool
	ended     bool // the end marker was seen
	tools     bool // a tool call was seen
	events    int  // events with data seen

	usage Usage

	// Chat: per-choice state; the id, created and model of the chunks (raw JSON) for the
	// injected unified_routing chunk.
	choices          []choiceState
	finish           []byte // Chat choice 0's finish_reason, Anthropic stop_reason, Responses status (raw JSON)
	id, created, mdl []byte
	untracked        bool // a choice index above maxChoices was seen

	// Responses: the highest sequence_number, and output items opened and closed.
	seq              int64
	items, itemsDone int

	// Messages: a message_delta carried a stop_reason; the input counts so far.
	stopSeen    bool
	anthropicIn anthropicInput

	// model is Options.Model as a JSON string; modelFrom:modelTo the provider's model value
	// in the last event's data, when it must be replaced (model.go).
	model              []byte
	modelFrom, modelTo int
}

// New returns a Classifier for a stream in dialect d.
func New(d dialect.Dialect, opts Options) *Classifier {
	c := &Classifier{}
	c.Reset(d, opts)
	return c
}

// Reset readies c for a new stream, keeping its buffers.
func (c *Classifier) Reset(d dialect.Dialect, opts Options) {
	*c = Classifier{
		d: d, opts: opts, seq: -1,
		choices: c.choices[:0], finish: c.finish[:0], id: c.id[:0], created: c.created[:0], mdl: c.mdl[:0],
		model: quoteModel(opts.Model),
	}
}

// Dialect is the stream's dialect.
func (c *Classifier) Dialect() dialect.Dialect { return c.d }

// Usage is the usage reported so far.
func (c *Classifier) Usage() Usage { return c.usage }

// Classify reads one block of the stream. Comment and empty blocks never commit: they only
// show the upstream is alive (keepalives count for idleMs, not for commit).
func (c *Classifier) Classify(ev *sse.Event) Verdict {
	c.modelFrom, c.modelTo = 0, 0
	if ev.Kind != sse.KindEvent {
		return Verdict{}
	}
	c.events++
	var v Verdict
	switch c.d {
	case dialect.Chat:
		v = c.chat(ev)
	case dialect.Responses:
		v = c.responses(ev)
	case dialect.Messages:
		v = c.messages(ev)
	default:
		return Verdict{}
	}
	if v.Error {
		c.failed = true
	}
	if c.failed {
		// After an in-band error (OpenAI follows it with [DONE]) there is no successful end
		// to carry unified_routing.
		v.Final = false
	}
	if v.Output && !c.committed {
		c.committed = true
		v.First = true
	}
	return v
}

// Outcome is the in-band error event ev (one Classify marked Error) as routing/failure
// reads it: InBand, the stream's status 200, the event name, and the event's data JSON as
// Body. Body aliases ev.Data: classify it before the next Feed.
func (c *Classifier) Outcome(ev *sse.Event) failure.Outcome {
	return failure.Outcome{
		Provider: c.opts.Provider, Status: 200, InBand: true, Body: ev.Data, Event: c.eventName(ev),
	}
}

// eventName is the in-band error's event name as a constant string (no allocation).
func (c *Classifier) eventName(ev *sse.Event) string {
	switch string(ev.Name) {
	case "":
		if c.d == dialect.Responses && typeOf(ev) == "response.failed" {
			return "response.failed"
		}
		if c.d != dialect.Chat && typeOf(ev) == "error" {
			return "error"
		}
		return ""
	case "error":
		return "error"
	case "response.failed":
		return "response.failed"
	}
	return "error"
}
