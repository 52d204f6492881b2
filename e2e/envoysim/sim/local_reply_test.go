package sim_test

import (
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/tidwall/gjson"
	"google.golang.org/protobuf/types/known/structpb"
)

// localReplyHCM is a local_reply_config like the shipped bootstraps': Anthropic's shape for
// /v1/messages 413s, skipped when the processor marked the reply as its own; a catch-all
// that changes the status and formats text.
const localReplyHCM = `local_reply_config: {mappers: [` +
	`{filter: {and_filter: {filters: [{header_filter: {header: {name: ":path", string_match: {prefix: /v1/messages}}}}, {status_code_filter: {comparison: {op: EQ, value: {default_value: 413}}}}, {metadata_filter: {matcher: {filter: ns, path: [{key: answered}], value: {bool_match: false}}}}]}}, ` +
	`body_format_override: {json_format: {type: error, error: {type: request_too_large, message: "%LOCAL_REPLY_BODY%", code: "%RESPONSE_CODE%"}}}}, ` +
	`{filter: {metadata_filter: {matcher: {filter: ns, path: [{key: answered}], value: {bool_match: false}}}}, status_code: 502, ` +
	`body_format_override: {text_format: "envoy said %RESPONSE_CODE%: %LOCAL_REPLY_BODY%"}}]}`

// local_reply_config (local_reply.cc): Envoy's own 413 over the buffer limit is rewritten by
// the first matching mapper (json_format, typed %RESPONSE_CODE%, application/json); an
// ImmediateResponse whose dynamic metadata the metadata_filter excludes keeps its body and
// status; one it does not exclude gets the catch-all's status and text body.
func TestLocalReplyConfig(t *testing.T) {
	ps := newProcServer(t)
	_, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, bufferLimit: 1024, hcm: []string{localReplyHCM}, clusters: []string{ca},
		filters: []string{extProcYAML("r", "request_header_mode: SEND, request_body_mode: BUFFERED, response_header_mode: SKIP",
			"metadata_options: {receiving_namespaces: {untyped: [ns]}}")}})

	// Envoy's 413: the body overflows while the headers are with the processor.
	res := e.do("POST", "/v1/messages", strings.Repeat("a", 2048), "X-Cluster", "a")
	// The overflow may end the processor's stream before it reads the headers: only its
	// opening is certain.
	ps.next(t, "r")
	r := await(t, res)
	mustOK(t, r, 413)
	if r.resp.Header.Get("Content-Type") != "application/json" || gjson.Get(r.body, "type").String() != "error" ||
		gjson.Get(r.body, "error.message").String() != "Payload Too Large" || gjson.Get(r.body, "error.code").Raw != "413" {
		t.Fatalf("413 %q %v", r.body, r.resp.Header)
	}

	immediate := func(md *structpb.Struct) *extprocv3.ProcessingResponse {
		return &extprocv3.ProcessingResponse{DynamicMetadata: md, Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
			Status: &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}, Headers: setHeaders("content-type", "application/json"), Body: []byte(`{"own":1}`)}}}
	}
	answered, _ := structpb.NewStruct(map[string]any{"ns": map[string]any{"answered": true}})
	res = e.do("GET", "/v1/models", "", "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	st.Send(t, immediate(answered))
	r = await(t, res)
	mustOK(t, r, 503)
	if r.body != `{"own":1}` || r.resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("the processor's own reply was rewritten: %q %v", r.body, r.resp.Header)
	}

	res = e.do("GET", "/v1/models", "", "X-Cluster", "a")
	st = ps.next(t, "r")
	st.Recv(t)
	st.Send(t, immediate(nil))
	r = await(t, res)
	mustOK(t, r, 502)
	if r.body != `envoy said 502: {"own":1}` || r.resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("catch-all %q %v", r.body, r.resp.Header)
	}
}
