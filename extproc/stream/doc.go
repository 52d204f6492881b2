// Package stream classifies the frames of a streamed LLM response for the attempt role
// (behaviour §8): OpenAI Chat Completions, OpenAI Responses and Anthropic Messages, the event
// streams of docs/wire-formats.md §1.2, §2.1 and §3.2. It sits on package sse: the
// caller parses the upstream body into events and hands each one to a Classifier, which
// says, per event:
//
//   - whether it commits the stream: the first frame carrying output (content, reasoning,
//     a refusal or a tool call) ends the window in which the attempt may still fail over
//     (behaviour §8.2); Verdict.First marks it, which is also the time to first token;
//   - whether it is an in-band error (behaviour §8.5), to classify with routing/failure through
//     Classifier.Outcome;
//   - whether to drop it from what the client receives (the usage chunk the gateway asked
//     for and the client did not);
//   - whether it is the final frame that carries unified_routing (behaviour §10.1,
//     Classifier.AppendFinal);
//   - whether it is the protocol's end marker.
//
// At the end of the stream Classifier.End says whether it was complete, complete with
// anomalies, or truncated (behaviour §8.4), with the usage collected across frames. After commit
// a failure is told to the client with Classifier.AppendError, an error event shaped like
// the provider's own, so that the SDKs raise an error rather than return a silent
// truncation.
//
// The upstream's dialect is the client's (no translation yet). Events are read with gjson
// over the event data, never decoded whole; Classify allocates nothing on the steady-state
// path (BenchmarkParseClassify).
package stream
