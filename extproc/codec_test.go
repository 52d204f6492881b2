package extproc

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/switchyard-gw/switchyard/internal/contract"
)

// The answers' codec must give Envoy exactly the message protobuf-go would: every answer
// with dynamic metadata, and random Structs of every kind, decode to what was sent, with the
// generated marshalling (the vtprotobuf tag, as make builds) or without it.

func TestVTCodecAnswers(t *testing.T) {
	var m mutation
	m.setHeader(contract.HeaderCluster, contract.ClusterName("a"))
	m.removeHeader("authorization")
	sealed := strings.Repeat("s", 900) // a real state's size: multi-byte lengths at every level
	answers := map[string]*extprocv3.ProcessingResponse{
		"route attempt":         routeAttempt(m, sealed),
		"provider attempt sent": {Response: continueRequestHeaders().Response, DynamicMetadata: sentMetadata()},
		"empty metadata":        {Response: continueRequestBody().Response, DynamicMetadata: &structpb.Struct{}},
		"no metadata":           continueRequestBody(),
		"wait":                  announceWait(1500 * time.Millisecond),
	}
	waitWithMetadata := announceWait(time.Second)
	waitWithMetadata.DynamicMetadata = stateMetadata("x") // fields after dynamic_metadata's number
	answers["fields after the metadata"] = waitWithMetadata
	c := newVTCodec()
	for name, resp := range answers {
		t.Run(name, func(t *testing.T) {
			before := proto.Clone(resp)
			data, err := c.Marshal(resp)
			if err != nil {
				t.Fatal(err)
			}
			got := &extprocv3.ProcessingResponse{}
			if err := proto.Unmarshal(data.Materialize(), got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(resp, got) {
				t.Fatalf("decoded answer differs:\nsent    %v\ndecoded %v", resp, got)
			}
			if !proto.Equal(resp, before) {
				t.Fatal("Marshal changed the answer")
			}
		})
	}
}

func TestVTCodecUnmarshalsLikeGRPC(t *testing.T) {
	c := newVTCodec()
	req := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: hdrs(":path", "/v1/chat/completions")}}}
	raw, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	got := &extprocv3.ProcessingRequest{}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(raw)}, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(req, got) {
		t.Fatalf("got %v, want %v", got, req)
	}
}

// randomValue builds a Value of a random kind, nested up to depth.
func randomValue(r *rand.Rand, depth int) *structpb.Value {
	kinds := 7
	if depth == 0 {
		kinds = 5 // scalars only
	}
	switch r.IntN(kinds) {
	case 0:
		return structpb.NewNullValue()
	case 1:
		return structpb.NewNumberValue([]float64{0, -1.5, 1e300, float64(r.Int64())}[r.IntN(4)])
	case 2:
		return structpb.NewStringValue(strings.Repeat("é", r.IntN(3)*r.IntN(80))) // empty, short, over 127 bytes
	case 3:
		return structpb.NewBoolValue(r.IntN(2) == 0)
	case 4:
		return &structpb.Value{} // no kind
	case 5:
		return structpb.NewStructValue(randomStruct(r, depth-1))
	}
	l := &structpb.ListValue{}
	for range r.IntN(4) {
		l.Values = append(l.Values, randomValue(r, depth-1))
	}
	return structpb.NewListValue(l)
}

func randomStruct(r *rand.Rand, depth int) *structpb.Struct {
	s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for i := range r.IntN(5) {
		s.Fields[strings.Repeat("k", i)] = randomValue(r, depth) // "" is a key too
	}
	return s
}

// Random Structs of every kind, nested, survive the codec.
func TestVTCodecStructs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	c := newVTCodec()
	for i := range 500 {
		md := randomStruct(r, 0)
		resp := &extprocv3.ProcessingResponse{Response: continueRequestBody().Response, DynamicMetadata: md}
		data, err := c.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		got := &extprocv3.ProcessingResponse{}
		if err := proto.Unmarshal(data.Materialize(), got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, resp) {
			t.Fatalf("case %d: decoded %v, want %v", i, got.GetDynamicMetadata(), md)
		}
	}
}

// BenchmarkResponseCodec: a route answer, and an attempt role's rewrite of a 100 KiB body,
// through this codec and through gRPC's.
func BenchmarkResponseCodec(b *testing.B) {
	var m mutation
	m.setHeader(contract.HeaderCluster, contract.ClusterName("a"))
	m.setHeader(headerTimeout, "1800000")
	m.removeHeader("authorization")
	answers := map[string]*extprocv3.ProcessingResponse{
		"route":   routeAttempt(m, strings.Repeat("s", 700)),
		"rewrite": rewriteRequest(m, bytes.Repeat([]byte("x"), 100<<10), sentMetadata()),
	}
	for name, c := range map[string]interface {
		Marshal(any) (mem.BufferSlice, error)
	}{"codec": newVTCodec(), "grpc": newVTCodec().base} {
		for answer, resp := range answers {
			b.Run(answer+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					data, err := c.Marshal(resp)
					if err != nil {
						b.Fatal(err)
					}
					data.Free()
				}
			})
		}
	}
}
