package sim

import (
	"context"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// resource imitates one limit of Upstream::ResourceManagerImpl
// (source/common/upstream/resource_manager_impl.h): a count that canCreate refuses to
// raise past max. A cluster's circuit_breakers thresholds for the DEFAULT routing priority
// set max_pending_requests, max_requests (1024 each by default) and max_retries (3; held
// by retry.go), api/envoy/config/cluster/v3/circuit_breaker.proto.
type resource struct {
	max   int64
	count atomic.Int64
}

// acquire is canCreate then inc.
func (r *resource) acquire() bool {
	for {
		c := r.count.Load()
		if c >= r.max {
			return false
		}
		if r.count.CompareAndSwap(c, c+1) {
			return true
		}
	}
}

func (r *resource) release() { r.count.Add(-1) }

const (
	defaultResourceMax = 1024 // Thresholds.max_pending_requests and max_requests
	defaultMaxRetries  = 3    // Thresholds.max_retries
)

// overflowStatus is what Envoy's gRPC async client reports for a stream its cluster
// refuses: the router's local reply to the overflow, a 503 that Grpc::Utility maps to
// UNAVAILABLE, with the reset body as the message.
var overflowStatus = status.New(codes.Unavailable, "upstream connect error or disconnect/reset before headers. reset reason: overflow")

// limitedConn applies a gRPC client cluster's max_requests to its streams: every stream of
// an envoy_grpc client is a request on the cluster's HTTP/2 pool, counted from the moment it
// is attached to the connection (ConnPoolImplBase::attachStreamToClient, which fails it with
// PoolFailureReason::Overflow past the limit) until it ends.
type limitedConn struct {
	grpc.ClientConnInterface
	requests *resource
}

func (c limitedConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if !c.requests.acquire() {
		return nil, overflowStatus.Err()
	}
	var once sync.Once
	release := func() { once.Do(c.requests.release) }
	cs, err := c.ClientConnInterface.NewStream(ctx, desc, method, opts...)
	if err != nil {
		release()
		return nil, err
	}
	stop := context.AfterFunc(ctx, release)
	return &limitedStream{ClientStream: cs, release: func() { stop(); release() }}, nil
}

// limitedStream releases its request when it ends: an error (io.EOF included) from RecvMsg,
// or its context's end.
type limitedStream struct {
	grpc.ClientStream
	release func()
}

func (s *limitedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		s.release()
	}
	return err
}
