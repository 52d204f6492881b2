package stream

import (
	"github.com/switchyard-gw/switchyard/extproc/dialect"
)

// State is how a stream ended (behaviour §8.4).
type State uint8

const (
	// Complete: the stream reached its end marker or finished every choice; Anomalies says
	// what was missing. Never retried.
	Complete State = iota + 1
	// Truncated: neither the end marker nor every choice finished (a dropped connection):
	// the caller fails the attempt as upstream_stream_truncated.
	Truncated
	// Failed: an in-band error event was seen.
	Failed
)

func (s State) String() string {
	switch s {
	case Complete:
		return "complete"
	case Truncated:
		return "truncated"
	case Failed:
		return "failed"
	}
	return "unknown"
}

// Anomaly names, as recorded on the attempt (behaviour §8.4 "anomalies").
const (
	AnomalyNoDone            = "no [DONE]"
	AnomalyNoCompleted       = "no response.completed"
	AnomalyNoMessageStop     = "no message_stop"
	AnomalyInferredToolCalls = "no finish_reason: inferred tool_calls"
	AnomalyInferredStop      = "no finish_reason: inferred stop"
	AnomalyInferredToolUse   = "no stop_reason: inferred tool_use"
	AnomalyInferredEndTurn   = "no stop_reason: inferred end_turn"
	AnomalyEmpty             = "empty response"
)

// Completion is the verdict on a whole stream.
type Completion struct {
	State State
	// Anomalies lists what a Complete stream lacked (constants above), in a fixed order.
	Anomalies []string
	// FinishReason is the stream's finish reason in its dialect's words: Chat choice 0's
	// finish_reason, Anthropic's stop_reason, Responses' status or incomplete_details.reason;
	// inferred when missing (tool_calls / tool_use if tools were called, else stop /
	// end_turn).
	FinishReason string
	Usage        Usage
}

// End judges the stream once its body ended (behaviour §8.4: no stricter than the provider's
// SDK). It allocates the Anomalies slice, once per stream.
func (c *Classifier) End() Completion {
	out := Completion{Usage: c.usage}
	if c.failed {
		out.State = Failed
		return out
	}
	switch c.d {
	case dialect.Chat:
		c.endChat(&out)
	case dialect.Responses:
		c.endResponses(&out)
	case dialect.Messages:
		c.endMessages(&out)
	default:
		out.State = Truncated
	}
	if out.State == Complete && !c.committed {
		// An empty response is a response (behaviour §8.4): recorded, not failed.
		out.Anomalies = append(out.Anomalies, AnomalyEmpty)
	}
	return out
}

func (c *Classifier) endChat(out *Completion) {
	seen, unfinished, unfinishedTools := 0, 0, false
	for _, ch := range c.choices {
		if !ch.seen {
			continue
		}
		seen++
		if !ch.finished {
			unfinished++
			unfinishedTools = unfinishedTools || ch.tools
		}
	}
	out.FinishReason = unquote(c.finish)
	switch {
	case c.ended:
		out.State = Complete
	case seen > 0 && unfinished == 0 && !c.untracked:
		out.State = Complete
		out.Anomalies = append(out.Anomalies, AnomalyNoDone)
	default:
		out.State = Truncated
		return
	}
	if unfinished > 0 {
		inferred, reason := AnomalyInferredStop, "stop"
		if unfinishedTools {
			inferred, reason = AnomalyInferredToolCalls, "tool_calls"
		}
		out.Anomalies = append(out.Anomalies, inferred)
		if len(c.choices) > 0 && c.choices[0].seen && !c.choices[0].finished {
			out.FinishReason = reason
		}
	}
}

func (c *Classifier) endResponses(out *Completion) {
	out.FinishReason = unquote(c.finish)
	switch {
	case c.ended:
		out.State = Complete
	case c.items > 0 && c.itemsDone >= c.items:
		// Every output item finished, as every choice can in Chat; only the terminal event
		// (and its usage) is missing.
		out.State = Complete
		out.Anomalies = append(out.Anomalies, AnomalyNoCompleted)
		out.FinishReason = "completed"
	default:
		out.State = Truncated
	}
}

func (c *Classifier) endMessages(out *Completion) {
	out.FinishReason = unquote(c.finish)
	switch {
	case c.ended:
		out.State = Complete
		if !c.stopSeen {
			inferred, reason := AnomalyInferredEndTurn, "end_turn"
			if c.tools {
				inferred, reason = AnomalyInferredToolUse, "tool_use"
			}
			out.Anomalies = append(out.Anomalies, inferred)
			out.FinishReason = reason
		}
	case c.stopSeen:
		out.State = Complete
		out.Anomalies = append(out.Anomalies, AnomalyNoMessageStop)
	default:
		out.State = Truncated
	}
}

// Anomalies is what End would report were the stream to end now after its end marker:
// what it lacks that no later event can supply (an inferred finish reason, an empty
// response), for the final event, which carries unified_routing before the body ends.
// A missing end marker is not known yet. It allocates only when there are anomalies.
func (c *Classifier) Anomalies() []string {
	if c.failed {
		return nil
	}
	ended := *c
	ended.ended = true
	return ended.End().Anomalies
}

// unquote is a raw JSON string's text (finish reasons are plain ASCII words); anything else
// gives "".
func unquote(raw []byte) string {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return ""
	}
	return string(raw[1 : len(raw)-1])
}
