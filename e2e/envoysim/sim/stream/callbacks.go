package stream

import (
	"context"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// LocalReply is an Envoy local reply (sendLocalReply in
// source/common/http/filter_manager.cc and Utility::sendLocalReply in
// source/common/http/utility.cc).
type LocalReply struct {
	Status int
	Body   string
	// Mutate edits the reply headers (ImmediateResponse header mutations).
	Mutate func(*Headers)
	// Details is %RESPONSE_CODE_DETAILS%.
	Details string
	// Flag is the Envoy response flag short name (UH, UF, URX, UT, NR, NC, ...), may be "".
	Flag string
	// GrpcStatus, when set, is the grpc-status of the reply to a gRPC request
	// (ImmediateResponse.grpc_status); otherwise it is derived from Status.
	GrpcStatus *uint32
}

// IO connects one filter to its neighbours. Decode frames flow client → upstream,
// encode frames flow upstream → client.
type IO struct {
	DecodeIn  *Queue[Frame]
	DecodeOut *Queue[Frame]
	EncodeIn  *Queue[Frame]
	EncodeOut *Queue[Frame]
}

// Chain is the plumbing of a filter chain of n filters plus a terminal filter
// (router or upstream codec). Filter i reads Filters[i].DecodeIn and writes
// Filters[i].DecodeOut, which is filter i+1's DecodeIn; the encode path runs the
// other way.
type Chain struct {
	Filters []IO
	// In is where the codec pushes decode frames; Out is where it reads encode frames.
	In, Out *Queue[Frame]
	// TermIn is the terminal filter's decode input; TermOut its encode output.
	TermIn, TermOut *Queue[Frame]
}

// NewChain builds the queues for n filters.
func NewChain(n int) *Chain {
	dec := make([]*Queue[Frame], n+1)
	enc := make([]*Queue[Frame], n+1)
	for i := range dec {
		dec[i], enc[i] = NewQueue[Frame](), NewQueue[Frame]()
	}
	c := &Chain{In: dec[0], Out: enc[0], TermIn: dec[n], TermOut: enc[n]}
	for i := 0; i < n; i++ {
		c.Filters = append(c.Filters, IO{DecodeIn: dec[i], DecodeOut: dec[i+1], EncodeIn: enc[i+1], EncodeOut: enc[i]})
	}
	return c
}

// Attributes is what a filter can read about its request, the source for ext_proc
// request_attributes (Envoy's CEL activation, source/extensions/filters/common/expr/context.cc).
type Attributes interface {
	RequestHeaders() *Headers
	RouteName() string
	// ClusterName is the route's cluster (xds.cluster_name), "" before routing.
	ClusterName() string
	ClusterMetadata() *corev3.Metadata
	// UpstreamHostMetadata is the metadata of the host chosen for this attempt
	// (xds.upstream_host_metadata); nil for downstream filters.
	UpstreamHostMetadata() *corev3.Metadata
	// AttemptCount is upstream.request_attempt_count (0 = unknown).
	AttemptCount() uint32
}

// Callbacks is what a filter gets from the stream it runs in.
type Callbacks interface {
	// ClearRouteCache drops the cached route so the router re-matches with the current
	// headers (StreamDecoderFilterCallbacks::downstreamCallbacks()->clearRouteCache()).
	ClearRouteCache()
	// DynamicMetadata is the request's StreamInfo dynamic metadata, shared by the
	// downstream and the upstream filters of the request.
	DynamicMetadata() *Metadata
	Attributes() Attributes
	// BufferLimit is the decoder/encoder buffer limit in bytes.
	BufferLimit() int
	// IsUpstream is true for filters of a cluster's upstream filter chain.
	IsUpstream() bool
	// Go runs fn in a goroutine tracked by the stream, so the stream can wait for it.
	Go(fn func())
	// Context is cancelled when the filter is destroyed.
	Context() context.Context
	// Inc increments the named counter (Envoy's filter stats, e.g.
	// "ext_proc.send_immediate_resp_upstream_ignored").
	Inc(counter string)
}

// Metadata is a concurrency-safe dynamic metadata store (StreamInfo::dynamicMetadata).
type Metadata struct {
	mu sync.Mutex
	md map[string]*structpb.Struct
}

// NewMetadata returns an empty store.
func NewMetadata() *Metadata { return &Metadata{md: map[string]*structpb.Struct{}} }

// Merge merges fields into namespace ns, as StreamInfo::setDynamicMetadata does
// (MergeFrom of the namespace Struct).
func (m *Metadata) Merge(ns string, s *structpb.Struct) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.md[ns]
	if !ok {
		cur = &structpb.Struct{Fields: map[string]*structpb.Value{}}
		m.md[ns] = cur
	}
	for k, v := range s.GetFields() {
		cur.Fields[k] = proto.Clone(v).(*structpb.Value)
	}
}

// Get returns a copy of namespace ns.
func (m *Metadata) Get(ns string) (*structpb.Struct, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.md[ns]
	if !ok {
		return nil, false
	}
	return proto.Clone(s).(*structpb.Struct), true
}

// Snapshot returns a copy of every namespace.
func (m *Metadata) Snapshot() map[string]*structpb.Struct {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]*structpb.Struct, len(m.md))
	for k, v := range m.md {
		out[k] = proto.Clone(v).(*structpb.Struct)
	}
	return out
}
