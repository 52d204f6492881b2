package extproc

import (
	"context"
	"math"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// limitConn applies grpc_service.envoy_grpc.max_receive_message_length to the
// Process stream (api/envoy/config/core/v3/grpc_service.proto: "If a message over this
// limit is received, the gRPC stream is terminated with the RESOURCE_EXHAUSTED
// error"; 0, the default, means unlimited — unlike grpc-go's 4 MiB default).
// Envoy's Grpc::AsyncStreamImpl::onData (source/common/grpc/async_client_impl.cc)
// ends the stream with streamError(ResourceExhausted) and an empty message, which
// reaches the filter as onGrpcError(8, "").
type limitConn struct {
	grpc.ClientConnInterface
	max int
}

func newLimitConn(conn grpc.ClientConnInterface, maxLen uint32) grpc.ClientConnInterface {
	n := math.MaxInt32
	if maxLen > 0 {
		n = int(maxLen)
	}
	return limitConn{ClientConnInterface: conn, max: n}
}

func (c limitConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := c.ClientConnInterface.NewStream(ctx, desc, method, append(opts, grpc.MaxCallRecvMsgSize(c.max))...)
	if err != nil {
		return nil, err
	}
	return limitStream{ClientStream: cs}, nil
}

type limitStream struct{ grpc.ClientStream }

func (s limitStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if st, ok := status.FromError(err); ok && st.Code() == codes.ResourceExhausted &&
		strings.HasPrefix(st.Message(), "grpc: received message larger than max") {
		return status.Error(codes.ResourceExhausted, "")
	}
	return err
}
