package extproc

import (
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/internal/contract"
)

// The pure functions in this file build every message switchyard sends back to Envoy. They
// hold no state and take no decisions, so each is table-tested at the protobuf level.

// Metadata keys inside contract.MetadataNamespace.
const (
	metaState = contract.MetadataState
	// metaSent marks that the attempt role of a provider attempt released the request to the
	// provider; the trampoline attempt uses it to tell a connect failure from a reset.
	metaSent = contract.MetadataSent
	// metaAnswered marks a route-role answer (an ImmediateResponse): the bootstraps'
	// local_reply_config mappers shape only Envoy's own local replies in the client's
	// dialect, and skip a reply with this key (their metadata_filter), which already is.
	metaAnswered = "answered"
)

// header is one header to set.
// header is one header to set; the dialect renderers and the provider rewrites build the
// same type, so their headers go into a mutation as they are.
type header = dialect.Header

// mutation is what a role changes in a header map: removals first, then sets (the order
// Envoy applies them in, mutation_utils.cc applyHeaderMutations).
type mutation struct {
	set    []header
	remove []string
}

func (m *mutation) setHeader(name, value string) {
	m.set = append(m.set, header{Name: name, Value: value})
}
func (m *mutation) removeHeader(name string) { m.remove = append(m.remove, name) }

func (m mutation) empty() bool { return len(m.set) == 0 && len(m.remove) == 0 }

// proto renders the mutation. Values go in raw_value only: Envoy reads raw_value alone
// (envoy#31555) and rejects a header with both set.
func (m mutation) proto() *extprocv3.HeaderMutation {
	hm := &extprocv3.HeaderMutation{}
	if len(m.remove) > 0 {
		hm.RemoveHeaders = append([]string(nil), m.remove...)
	}
	for _, h := range m.set {
		hm.SetHeaders = append(hm.SetHeaders, &corev3.HeaderValueOption{
			Header: &corev3.HeaderValue{Key: h.Name, RawValue: []byte(h.Value)},
		})
	}
	return hm
}

// continueRequestHeaders lets the request headers go on unchanged (the route role changes
// them in its body answer, where BUFFERED mode still applies header mutations).
func continueRequestHeaders() *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
		RequestHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{}},
	}}
}

// routeAttempt is the route role's answer that sends the request to a deployment cluster:
// the header mutation (cluster header, Envoy timeouts, removals), clear_route_cache so the
// router re-reads cluster_header (it needs a header mutation in the same answer), and the
// sealed state in dynamic metadata.
func routeAttempt(m mutation, sealed string) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
			Response: &extprocv3.CommonResponse{HeaderMutation: m.proto(), ClearRouteCache: true},
		}},
		DynamicMetadata: stateMetadata(sealed),
	}
}

// stateMetadata is the dynamic metadata carrying the sealed state within one pass.
func stateMetadata(sealed string) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		contract.MetadataNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			metaState: structpb.NewStringValue(sealed),
		}}),
	}}
}

// sentMetadata marks, within the pass, that the provider attempt went out.
func sentMetadata() *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		contract.MetadataNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			metaSent: structpb.NewBoolValue(true),
		}}),
	}}
}

// announceWait extends the message timeout of the pending request-body message by d: Envoy
// ignores every other field of a message that carries override_message_timeout
// (ext_proc.cc onNewTimeout), so the real answer follows after the wait.
func announceWait(d time.Duration) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{OverrideMessageTimeout: durationpb.New(d)}
}

// localReply answers the client directly (route role only: Envoy ignores an
// ImmediateResponse from an upstream ext_proc).
func localReply(status int, headers []header, body []byte, details string) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(status)},
			Headers: mutation{set: headers}.proto(),
			Body:    body,
			Details: details,
		},
	},
		// ext_proc applies an ImmediateResponse's dynamic_metadata before sending the local
		// reply (ext_proc.cc onReceiveMessage), so local_reply_config sees it.
		DynamicMetadata: &structpb.Struct{Fields: map[string]*structpb.Value{
			contract.MetadataNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
				metaAnswered: structpb.NewBoolValue(true),
			}}),
		}},
	}
}

// rewriteRequest is the attempt role's answer to the buffered request body: the provider's
// path, authority and credentials, and the body with the provider's model. Header mutations
// apply here because the headers are held in BUFFERED mode; content-length is set with the
// body, since BUFFERED with headers SEND keeps it and Envoy rejects a body of another length
// (processor_state.cc validateContentLength).
func rewriteRequest(m mutation, body []byte, meta *structpb.Struct) *extprocv3.ProcessingResponse {
	common := &extprocv3.CommonResponse{HeaderMutation: m.proto()}
	if body != nil {
		common.BodyMutation = &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: body}}
	}
	return &extprocv3.ProcessingResponse{
		Response:        &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{Response: common}},
		DynamicMetadata: meta,
	}
}

// continueResponseHeaders releases the held response headers with m applied.
func continueResponseHeaders(m mutation) *extprocv3.ProcessingResponse {
	common := &extprocv3.CommonResponse{}
	if !m.empty() {
		common.HeaderMutation = m.proto()
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocv3.HeadersResponse{Response: common},
	}}
}

// committedHeaders releases a committed stream's response headers and empties the sealed
// state in dynamic metadata. An attempt filter configured with forwarding_namespaces (a
// static configuration written before the state became a request attribute) gets the
// namespace with every body chunk that follows (ext_proc.cc setupBodyChunk →
// addDynamicMetadata), so a stream of hundreds of chunks would carry the whole state, for
// nobody: once the headers went to the client no retry or redirect can follow (the
// trampoline attempt and a 307 need it only before the commit).
// Envoy merges the reply's metadata into the namespace on a response-headers answer too
// (onReceiveMessage → setEncoderDynamicMetadata).
func committedHeaders(m mutation) *extprocv3.ProcessingResponse {
	r := continueResponseHeaders(m)
	r.DynamicMetadata = stateMetadata("")
	return r
}

// redirectMutation turns the held response into the 307 that re-enters the route role:
// Envoy's internal redirect follows it (router.cc setupRedirect) and copies
// x-switchyard-state into the new request (response_headers_to_copy). The provider's body
// headers go, so nothing of the failed answer leaks into the redirect.
func redirectMutation(location, sealed string) mutation {
	var m mutation
	for _, h := range []string{"content-type", "content-length", "content-encoding", "retry-after", "retry-after-ms", "set-cookie"} {
		m.removeHeader(h)
	}
	m.setHeader(":status", strconv.Itoa(307))
	m.setHeader("location", location)
	m.setHeader(contract.HeaderState, sealed)
	return m
}

// streamedBody hands bytes to Envoy in FULL_DUPLEX_STREAMED mode, where only what the
// processor returns reaches the client.
func streamedBody(b []byte, endOfStream bool) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
		ResponseBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{
			BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
				StreamedResponse: &extprocv3.StreamedBodyResponse{Body: b, EndOfStream: endOfStream},
			}},
		}},
	}}
}

// continueResponseTrailers lets response trailers go on unchanged; in FULL_DUPLEX_STREAMED
// they end the body.
func continueResponseTrailers() *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{
		ResponseTrailers: &extprocv3.TrailersResponse{},
	}}
}

// continueRequestTrailers lets request trailers go on unchanged.
func continueRequestTrailers() *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{
		RequestTrailers: &extprocv3.TrailersResponse{},
	}}
}
