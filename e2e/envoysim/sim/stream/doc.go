// Package stream holds the small data model envoysim's filters share: an ordered,
// lower-cased header map (Envoy's HeaderMap), the frames that flow through a filter
// chain (headers, body data, trailers, local replies), an unbounded queue that lets
// every filter run as its own goroutine without deadlocks, and the callbacks a
// filter gets from the stream it belongs to (Envoy's StreamDecoderFilterCallbacks).
//
// Envoy runs a stream's filters on one dispatcher thread; envoysim runs each filter
// instance in its own goroutine and connects them with ordered queues, which keeps
// the per-direction ordering Envoy guarantees (headers, then data, then trailers) and
// makes "held" frames explicit.
package stream
