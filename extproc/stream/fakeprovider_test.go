package stream

import (
	"slices"
	"testing"

	fp "github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/extproc/dialect"
)

var toolContent = &fp.Content{ToolCall: &fp.ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}}

// want is what the attempt role must conclude from one fake provider stream.
type want struct {
	first     int // index of the committing event among data events, -1: never commits
	state     State
	anomalies []string
	finish    string
	usage     Usage
	dropped   int
	errors    int
	finals    int
	// finalAnomalies: Anomalies at the last Final event, what unified_routing lists.
	finalAnomalies []string
}

var fakeVariants = []struct {
	v           variant
	clientUsage bool
	w           want
}{
	// Chat: the role-only chunk does not commit, the first content chunk does.
	{variant{"chat/normal/usage", fp.OpenAI, dialect.Chat, fp.Fault{}, true}, false,
		want{first: 1, state: Complete, finish: "stop", usage: Usage{12, 4, 16, true}, dropped: 1, finals: 1}},
	{variant{"chat/normal/client-usage", fp.OpenAI, dialect.Chat, fp.Fault{}, true}, true,
		want{first: 1, state: Complete, finish: "stop", usage: Usage{12, 4, 16, true}, finals: 1}},
	{variant{"chat/normal/no-usage", fp.OpenAI, dialect.Chat, fp.Fault{}, false}, false,
		want{first: 1, state: Complete, finish: "stop", finals: 1}},
	{variant{"chat/error@0", fp.OpenAI, dialect.Chat, fp.Fault{End: fp.EndError}, true}, false,
		want{first: -1, state: Failed, errors: 1}},
	{variant{"chat/error@2", fp.OpenAI, dialect.Chat, fp.Fault{End: fp.EndError, EndAfter: 2}, true}, false,
		want{first: 1, state: Failed, errors: 1}},
	{variant{"chat/nodone", fp.OpenAI, dialect.Chat, fp.Fault{End: fp.EndNoDone}, true}, false,
		want{first: 1, state: Complete, anomalies: []string{AnomalyNoDone}, finish: "stop", usage: Usage{12, 4, 16, true}, dropped: 1}},
	{variant{"chat/nostop", fp.OpenAI, dialect.Chat, fp.Fault{End: fp.EndNoStopReason}, true}, false,
		want{first: 1, state: Complete, anomalies: []string{AnomalyInferredStop}, finish: "stop", usage: Usage{12, 4, 16, true}, dropped: 1, finals: 1,
			finalAnomalies: []string{AnomalyInferredStop}}},
	{variant{"chat/cut@0", fp.OpenAI, dialect.Chat, fp.Fault{End: fp.EndCut}, true}, false,
		want{first: -1, state: Truncated}},
	{variant{"chat/cut@2", fp.OpenAI, dialect.Chat, fp.Fault{End: fp.EndCut, EndAfter: 2}, true}, false,
		want{first: 1, state: Truncated}},
	{variant{"chat/filtered@2", fp.OpenAI, dialect.Chat, fp.Fault{End: fp.EndFiltered, EndAfter: 2}, true}, false,
		want{first: 1, state: Complete, finish: "content_filter", usage: Usage{12, 2, 14, true}, dropped: 1, finals: 1}},
	{variant{"chat/tool", fp.OpenAI, dialect.Chat, fp.Fault{Content: toolContent}, true}, false,
		want{first: 1, state: Complete, finish: "tool_calls", usage: Usage{12, 4, 16, true}, dropped: 1, finals: 1}},
	{variant{"chat/tool/nodone", fp.OpenAI, dialect.Chat, fp.Fault{Content: toolContent, End: fp.EndNoDone}, false}, false,
		want{first: 1, state: Complete, anomalies: []string{AnomalyNoDone}, finish: "tool_calls"}},
	// Azure: the prompt annotation chunk ("choices":[], usage null) neither commits nor
	// is dropped.
	{variant{"azure/normal/usage", fp.Azure, dialect.Chat, fp.Fault{}, true}, false,
		want{first: 2, state: Complete, finish: "stop", usage: Usage{12, 4, 16, true}, dropped: 1, finals: 1}},
	{variant{"azure/filtered@0", fp.Azure, dialect.Chat, fp.Fault{End: fp.EndFiltered}, false}, false,
		want{first: -1, state: Complete, anomalies: []string{AnomalyEmpty}, finish: "content_filter", finals: 1, finalAnomalies: []string{AnomalyEmpty}}},
	{variant{"azure/error@1", fp.Azure, dialect.Chat, fp.Fault{End: fp.EndError, EndAfter: 1}, false}, false,
		want{first: 2, state: Failed, errors: 1}},
	{variant{"azure/cut@3", fp.Azure, dialect.Chat, fp.Fault{End: fp.EndCut, EndAfter: 3}, false}, false,
		want{first: 2, state: Truncated}},
	// Responses: created, in_progress, output_item.added, content_part.added, then deltas.
	{variant{"responses/normal", fp.OpenAI, dialect.Responses, fp.Fault{}, false}, false,
		want{first: 4, state: Complete, finish: "completed", usage: Usage{12, 4, 16, true}, finals: 1}},
	{variant{"responses/error@0", fp.OpenAI, dialect.Responses, fp.Fault{End: fp.EndError}, false}, false,
		want{first: -1, state: Failed, errors: 1}},
	{variant{"responses/failed@2", fp.OpenAI, dialect.Responses, fp.Fault{End: fp.EndFailed, EndAfter: 2}, false}, false,
		want{first: 4, state: Failed, errors: 1}},
	{variant{"responses/nodone", fp.OpenAI, dialect.Responses, fp.Fault{End: fp.EndNoDone}, false}, false,
		want{first: 4, state: Complete, anomalies: []string{AnomalyNoCompleted}, finish: "completed"}},
	{variant{"responses/cut@2", fp.OpenAI, dialect.Responses, fp.Fault{End: fp.EndCut, EndAfter: 2}, false}, false,
		want{first: 4, state: Truncated}},
	{variant{"responses/filtered@2", fp.OpenAI, dialect.Responses, fp.Fault{End: fp.EndFiltered, EndAfter: 2}, false}, false,
		want{first: 4, state: Complete, finish: "content_filter", usage: Usage{12, 2, 14, true}, finals: 1}},
	{variant{"responses/tool", fp.OpenAI, dialect.Responses, fp.Fault{Content: toolContent}, false}, false,
		want{first: 2, state: Complete, finish: "completed", usage: Usage{12, 4, 16, true}, finals: 1}},
	// Anthropic: message_start, content_block_start (text), ping, then deltas.
	{variant{"messages/normal", fp.Anthropic, dialect.Messages, fp.Fault{}, false}, false,
		want{first: 3, state: Complete, finish: "end_turn", usage: Usage{12, 4, 16, true}, finals: 1}},
	{variant{"messages/error@0", fp.Anthropic, dialect.Messages, fp.Fault{End: fp.EndError}, false}, false,
		want{first: -1, state: Failed, errors: 1, usage: Usage{12, 0, 12, true}}},
	{variant{"messages/error@2", fp.Anthropic, dialect.Messages, fp.Fault{End: fp.EndError, EndAfter: 2}, false}, false,
		want{first: 3, state: Failed, errors: 1, usage: Usage{12, 1, 13, true}}},
	{variant{"messages/nodone", fp.Anthropic, dialect.Messages, fp.Fault{End: fp.EndNoDone}, false}, false,
		want{first: 3, state: Complete, anomalies: []string{AnomalyNoMessageStop}, finish: "end_turn", usage: Usage{12, 4, 16, true}, finals: 1}},
	// Without stop_reason unified_routing rides on message_stop, which knows the stop
	// reason was inferred; with message_stop missing it rode on message_delta, before the
	// end marker could be missed.
	{variant{"messages/nostop", fp.Anthropic, dialect.Messages, fp.Fault{End: fp.EndNoStopReason}, false}, false,
		want{first: 3, state: Complete, anomalies: []string{AnomalyInferredEndTurn}, finish: "end_turn", usage: Usage{12, 4, 16, true}, finals: 1,
			finalAnomalies: []string{AnomalyInferredEndTurn}}},
	{variant{"messages/nostop/tool", fp.Anthropic, dialect.Messages, fp.Fault{End: fp.EndNoStopReason, Content: toolContent}, false}, false,
		want{first: 1, state: Complete, anomalies: []string{AnomalyInferredToolUse}, finish: "tool_use", usage: Usage{12, 4, 16, true}, finals: 1,
			finalAnomalies: []string{AnomalyInferredToolUse}}},
	{variant{"messages/cut@0", fp.Anthropic, dialect.Messages, fp.Fault{End: fp.EndCut}, false}, false,
		want{first: -1, state: Truncated, usage: Usage{12, 0, 12, true}}},
	{variant{"messages/cut@2", fp.Anthropic, dialect.Messages, fp.Fault{End: fp.EndCut, EndAfter: 2}, false}, false,
		want{first: 3, state: Truncated, usage: Usage{12, 1, 13, true}}},
	{variant{"messages/filtered@1", fp.Anthropic, dialect.Messages, fp.Fault{End: fp.EndFiltered, EndAfter: 1}, false}, false,
		want{first: 3, state: Complete, finish: "refusal", usage: Usage{12, 1, 13, true}, finals: 1}},
	{variant{"messages/tool", fp.Anthropic, dialect.Messages, fp.Fault{Content: toolContent}, false}, false,
		want{first: 1, state: Complete, finish: "tool_use", usage: Usage{12, 4, 16, true}, finals: 1}},
}

// TestFakeProviderStreams feeds every real stream of the fake provider (normal, in-band
// error, failed, no end marker, cut, filtered, tool calls; OpenAI, Azure, Responses,
// Anthropic) split at every byte into two chunks, asserts the result is the unsplit one,
// and checks it against what the stream means.
func TestFakeProviderStreams(t *testing.T) {
	for _, tc := range fakeVariants {
		t.Run(tc.v.name, func(t *testing.T) {
			body := tc.v.body(t)
			r := assertSplitsAgree(t, tc.v.d, Options{ClientUsage: tc.clientUsage}, body)
			w := tc.w
			e := r.End
			if r.First != w.first || e.State != w.state || !slices.Equal(e.Anomalies, w.anomalies) ||
				e.FinishReason != w.finish || e.Usage != w.usage || len(r.Dropped) != w.dropped ||
				len(r.Errors) != w.errors || len(r.Final) != w.finals ||
				(len(r.FinalAnomalies) > 0 && !slices.Equal(r.FinalAnomalies[len(r.FinalAnomalies)-1], w.finalAnomalies)) {
				t.Fatalf("got first=%d state=%s anomalies=%q finish=%q usage=%+v dropped=%d errors=%d finals=%d\n"+
					"want %+v\nrun %s\nbody %s", r.First, e.State, e.Anomalies, e.FinishReason, e.Usage,
					len(r.Dropped), len(r.Errors), len(r.Final), w, r, body)
			}
			for i, v := range r.Verdicts {
				if i < w.first || w.first < 0 {
					if hasFlag(v, 'O') {
						t.Fatalf("event %d (%s) commits before the first output event %d", i, v, w.first)
					}
				}
			}
		})
	}
}

func hasFlag(verdict string, f byte) bool {
	for i := len(verdict) - 1; i >= 0 && verdict[i] != ':'; i-- {
		if verdict[i] == f {
			return true
		}
	}
	return false
}
