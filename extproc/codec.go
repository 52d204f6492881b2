package extproc

import (
	"fmt"
	"runtime"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// GRPCServerOptions are the options of the gRPC server the ExternalProcessor runs on
// (cmd/switchyard adds its TLS and keepalives):
//   - the answers' codec (vtCodec: vtprotobuf's generated marshalling);
//   - stream workers: every request opens one stream per role, and a new goroutine per
//     stream grew its stack again on each (copystack was 15 µs of a route stream, measured
//     in BenchmarkRouteRole); gRPC starts a goroutine anyway when every worker is busy.
func GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(newVTCodec()),
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	}
}

// grpcFraming is the room a ProcessingRequest or ProcessingResponse needs around the body
// it carries: the protobuf tags and lengths, the headers (at most Envoy's
// max_request_headers_kb, 60 KiB by default, up to 8 MiB), the attributes and the forwarded
// dynamic metadata (the sealed state). 1 MiB covers all of them.
const grpcFraming = 1 << 20

// GRPCMessageLimit is the largest gRPC message the ext_proc server receives or sends for a
// body limit of maxBody bytes: a whole buffered request body (the route and attempt roles),
// a rewritten one, or a held response, plus its framing. grpc-go's default receive limit
// (4 MiB) would end the stream of any larger body with RESOURCE_EXHAUSTED ("grpc: received
// message larger than max"), which Envoy answers with status_on_error, a bare 503.
func GRPCMessageLimit(maxBody int) int { return maxBody + grpcFraming }

// GRPCServerOptions are GRPCServerOptions() with the message limits sized from the server's
// body limits (Options.MaxRequestBody, Options.MaxResponseHold): the options of the gRPC
// server that runs s.
func (s *Server) GRPCServerOptions() []grpc.ServerOption {
	n := GRPCMessageLimit(max(s.opts.MaxRequestBody, s.opts.MaxResponseHold))
	return append(GRPCServerOptions(), grpc.MaxRecvMsgSize(n), grpc.MaxSendMsgSize(n))
}

// vtMessage is a message with vtprotobuf's generated marshalling: go-control-plane ships it
// for the ext_proc messages (external_processor_vtproto.pb.go, built with the vtprotobuf
// tag), including their google.protobuf.Struct metadata, which protobuf-go sizes and writes
// through reflection, twice per answer.
type vtMessage interface {
	SizeVT() int
	// MarshalToSizedBufferVTStrict writes the message back to front into a buffer of exactly
	// SizeVT bytes, fields in number order.
	MarshalToSizedBufferVTStrict(b []byte) (int, error)
}

// vtCodec is gRPC's protobuf codec with vtprotobuf's generated marshalling where a message
// has it (every answer to Envoy, when built with the vtprotobuf tag); anything else, and
// every message it receives, goes through gRPC's own codec (vtprotobuf's codec/grpc refuses
// messages without the generated methods, like the health service's, and go-control-plane
// generates no unmarshalling). As in gRPC's codec, a large message goes into a buffer of
// gRPC's pool, which gRPC returns once the message is written.
type vtCodec struct{ base encoding.CodecV2 }

func newVTCodec() vtCodec { return vtCodec{base: encoding.GetCodecV2(grpcproto.Name)} }

func (c vtCodec) Name() string { return grpcproto.Name }

func (c vtCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(vtMessage)
	if !ok {
		return c.base.Marshal(v)
	}
	size := m.SizeVT()
	if mem.IsBelowBufferPoolingThreshold(size) {
		b := make([]byte, size)
		if _, err := m.MarshalToSizedBufferVTStrict(b); err != nil {
			return nil, fmt.Errorf("marshalling %T: %w", v, err)
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	if _, err := m.MarshalToSizedBufferVTStrict((*buf)[:size]); err != nil {
		pool.Put(buf)
		return nil, fmt.Errorf("marshalling %T: %w", v, err)
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

func (c vtCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.base.Unmarshal(data, v) }
