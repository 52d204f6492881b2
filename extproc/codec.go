package extproc

import (
	"fmt"
	"math"
	"runtime"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// GRPCServerOptions are the options of the gRPC server the ExternalProcessor runs on
// (cmd/switchyard adds its TLS and keepalives):
//   - the answers' codec (responseCodec);
//   - stream workers: every request opens one stream per role, and a new goroutine per
//     stream grew its stack again on each (copystack was 15 µs of a route stream, measured
//     in BenchmarkRouteRole); gRPC starts a goroutine anyway when every worker is busy.
func GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(newResponseCodec()),
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

// fieldDynamicMetadata is ProcessingResponse.dynamic_metadata's field number.
const fieldDynamicMetadata protowire.Number = 8

// responseCodec is gRPC's protobuf codec, except for the dynamic metadata of a
// ProcessingResponse (the sealed state, on most answers): protobuf-go sizes and writes a
// google.protobuf.Struct's map through reflection, twice per answer, which cost more than
// the rest of the route role's answer. appendStruct writes the same encoding directly.
// Everything else, and every message Envoy sends, goes through gRPC's own codec.
type responseCodec struct{ base encoding.CodecV2 }

func newResponseCodec() responseCodec {
	return responseCodec{base: encoding.GetCodecV2(grpcproto.Name)}
}

func (c responseCodec) Name() string { return grpcproto.Name }

func (c responseCodec) Marshal(v any) (mem.BufferSlice, error) {
	resp, ok := v.(*extprocv3.ProcessingResponse)
	if !ok || resp.DynamicMetadata == nil {
		return c.base.Marshal(v)
	}
	return marshalResponse(resp)
}

func (c responseCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.base.Unmarshal(data, v) }

// marshalResponse encodes resp with its dynamic metadata written by appendStruct. A
// protobuf parser takes a message's fields in any order, so the metadata goes first and the
// rest, which can hold a whole request or response body, is marshalled once after it. As in
// gRPC's codec, a large answer goes into a buffer of gRPC's pool, which gRPC returns once
// the message is written.
func marshalResponse(resp *extprocv3.ProcessingResponse) (mem.BufferSlice, error) {
	md := resp.DynamicMetadata
	meta, at := beginMessage(make([]byte, 0, 1024), fieldDynamicMetadata)
	meta = endMessage(appendStruct(meta, md), at)
	// The answer is built for this one send, by the goroutine sending it.
	resp.DynamicMetadata = nil
	defer func() { resp.DynamicMetadata = md }()
	size := len(meta) + proto.Size(resp)
	// UseCachedSize: proto.Size just sized resp, which nothing changes meanwhile.
	opts := proto.MarshalOptions{UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.MarshalAppend(meta, resp)
		if err != nil {
			return nil, fmt.Errorf("marshalling an ext_proc answer: %w", err)
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	b, err := opts.MarshalAppend(append((*buf)[:0], meta...), resp)
	if err != nil {
		pool.Put(buf)
		return nil, fmt.Errorf("marshalling an ext_proc answer: %w", err)
	}
	*buf = b
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// google.protobuf.Struct, Value and ListValue field numbers (struct.proto).
const (
	fStruct_Fields   protowire.Number = 1
	fEntry_Key       protowire.Number = 1
	fEntry_Value     protowire.Number = 2
	fValue_Null      protowire.Number = 1
	fValue_Number    protowire.Number = 2
	fValue_String    protowire.Number = 3
	fValue_Bool      protowire.Number = 4
	fValue_Struct    protowire.Number = 5
	fValue_List      protowire.Number = 6
	fListValue_Value protowire.Number = 1
)

// appendStruct appends s's fields (the body of a Struct message). Map entries are written
// as protobuf-go writes them: key and value always, in map order.
func appendStruct(b []byte, s *structpb.Struct) []byte {
	for k, v := range s.GetFields() {
		var entry, value int
		b, entry = beginMessage(b, fStruct_Fields)
		b = appendBytesField(b, fEntry_Key, k)
		b, value = beginMessage(b, fEntry_Value)
		b = endMessage(appendValue(b, v), value)
		b = endMessage(b, entry)
	}
	return b
}

// appendValue appends v's body. A oneof member is written even when it holds its zero
// value; a Value with no kind is empty.
func appendValue(b []byte, v *structpb.Value) []byte {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		b = appendUvarint(appendTag(b, fValue_Null, protowire.VarintType), uint64(k.NullValue))
	case *structpb.Value_NumberValue:
		b = protowire.AppendFixed64(appendTag(b, fValue_Number, protowire.Fixed64Type), math.Float64bits(k.NumberValue))
	case *structpb.Value_StringValue:
		b = appendBytesField(b, fValue_String, k.StringValue)
	case *structpb.Value_BoolValue:
		b = appendUvarint(appendTag(b, fValue_Bool, protowire.VarintType), protowire.EncodeBool(k.BoolValue))
	case *structpb.Value_StructValue:
		var at int
		b, at = beginMessage(b, fValue_Struct)
		b = endMessage(appendStruct(b, k.StructValue), at)
	case *structpb.Value_ListValue:
		var at int
		b, at = beginMessage(b, fValue_List)
		for _, e := range k.ListValue.GetValues() {
			var el int
			b, el = beginMessage(b, fListValue_Value)
			b = endMessage(appendValue(b, e), el)
		}
		b = endMessage(b, at)
	}
	return b
}
