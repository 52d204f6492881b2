package stream

import "sync"

// Kind is the type of a Frame.
type Kind uint8

// Frame kinds, in the order a direction may carry them.
const (
	KindHeaders Kind = iota + 1
	KindData
	KindTrailers
	// KindLocalReply carries an Envoy local reply (sendLocalReply). It travels the
	// encode path toward the downstream codec and every filter forwards it at once,
	// ahead of anything it holds: a local reply for a response whose headers are held
	// by a filter "bypasses the filter chain and goes directly to the codec", and
	// since Envoy 1.34 local replies are not sent to ext_proc
	// (source/common/http/filter_manager.cc sendLocalReply; ext_proc
	// skip_ext_proc_on_local_reply in changelogs/1.34.0.yaml).
	KindLocalReply
	// KindReset carries an upstream stream reset from the upstream codec to the router
	// through the upstream filters, which forward it at once like a local reply: the
	// router sees the reset after whatever those filters had already passed on, and
	// before anything they still hold (UpstreamRequest::onResetStream).
	KindReset
	// KindFlush travels the decode path of an upstream filter chain behind every frame
	// pushed before it; filters forward it at once, ahead of anything they hold. The
	// upstream codec sends it after a failed connect and reports the pool failure only
	// when it comes back, so the upstream filters have run on everything the router
	// passed them first: Envoy runs them synchronously in acceptHeadersFromRouter /
	// acceptDataFromRouter, while onPoolFailure arrives in a later event
	// (source/common/router/upstream_request.cc).
	KindFlush
)

// Frame is one event of a direction of a stream.
type Frame struct {
	Kind    Kind
	Headers *Headers // headers or trailers
	Data    []byte
	// End marks the end of the direction (Envoy end_stream). Trailers always end.
	End   bool
	Reply *LocalReply
	// Reset is set for KindReset.
	Reset *Reset
}

// Reset describes an upstream stream reset (Http::StreamResetReason plus the transport
// failure reason).
type Reset struct {
	Reason int
	Detail string
}

// FlushFrame builds a flush marker (see KindFlush).
func FlushFrame() Frame { return Frame{Kind: KindFlush} }

// HeadersFrame builds a headers frame.
func HeadersFrame(h *Headers, end bool) Frame { return Frame{Kind: KindHeaders, Headers: h, End: end} }

// DataFrame builds a data frame.
func DataFrame(b []byte, end bool) Frame { return Frame{Kind: KindData, Data: b, End: end} }

// TrailersFrame builds a trailers frame.
func TrailersFrame(t *Headers) Frame { return Frame{Kind: KindTrailers, Headers: t, End: true} }

// LocalReplyFrame builds a local reply frame.
func LocalReplyFrame(r *LocalReply) Frame { return Frame{Kind: KindLocalReply, Reply: r, End: true} }

// ResetFrame builds a reset frame.
func ResetFrame(r *Reset) Frame { return Frame{Kind: KindReset, Reset: r, End: true} }

// Queue is an unbounded FIFO whose Ready channel can be used in select. envoysim does
// no flow control (Envoy's watermarks); buffer limits that Envoy enforces with local
// replies are enforced explicitly where Envoy does.
type Queue[T any] struct {
	mu    sync.Mutex
	items []T
	ready chan struct{}
}

// NewQueue returns an empty queue.
func NewQueue[T any]() *Queue[T] { return &Queue[T]{ready: make(chan struct{}, 1)} }

// Push appends v and signals Ready.
func (q *Queue[T]) Push(v T) {
	q.mu.Lock()
	q.items = append(q.items, v)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// Ready fires after Push; call Drain after receiving from it.
func (q *Queue[T]) Ready() <-chan struct{} { return q.ready }

// Drain removes and returns everything queued.
func (q *Queue[T]) Drain() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}
