package extproc

import (
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-gw/switchyard/internal/contract"
)

// TestAnswers pins every message switchyard sends Envoy at the protobuf level.
func TestAnswers(t *testing.T) {
	m := mutation{remove: []string{"authorization"}, set: []header{{Name: contract.HeaderCluster, Value: "sy-dep-a"}}}
	for _, tc := range []struct {
		name string
		got  *extprocv3.ProcessingResponse
		want string // prototext of the expected message
	}{
		{
			name: "continue request headers",
			got:  continueRequestHeaders(),
			want: `request_headers: {response: {}}`,
		},
		{
			name: "route to a deployment: mutation, clear_route_cache, state in metadata",
			got:  routeAttempt(m, "SEALED"),
			want: `request_body: {response: {header_mutation: {set_headers: [{header: {key: "x-switchyard-cluster" raw_value: "sy-dep-a"}}] remove_headers: ["authorization"]} clear_route_cache: true}}
				dynamic_metadata: {fields: {key: "switchyard" value: {struct_value: {fields: {key: "state" value: {string_value: "SEALED"}}}}}}`,
		},
		{
			name: "announce a wait: override_message_timeout alone",
			got:  announceWait(1500 * time.Millisecond),
			want: `override_message_timeout: {seconds: 1 nanos: 500000000}`,
		},
		{
			name: "local reply",
			got:  localReply(429, []header{{Name: "retry-after", Value: "3"}}, []byte(`{"error":{}}`), "switchyard_rate_limit_exceeded"),
			want: `immediate_response: {status: {code: TooManyRequests} headers: {set_headers: [{header: {key: "retry-after" raw_value: "3"}}]} body: "{\"error\":{}}" details: "switchyard_rate_limit_exceeded"}
				dynamic_metadata: {fields: {key: "switchyard" value: {struct_value: {fields: {key: "answered" value: {bool_value: true}}}}}}`,
		},
		{
			name: "rewrite the request with a body and the sent mark",
			got:  rewriteRequest(mutation{set: []header{{Name: ":path", Value: "/v1/messages"}}}, []byte(`{"model":"m"}`), sentMetadata()),
			want: `request_body: {response: {header_mutation: {set_headers: [{header: {key: ":path" raw_value: "/v1/messages"}}]} body_mutation: {body: "{\"model\":\"m\"}"}}}
				dynamic_metadata: {fields: {key: "switchyard" value: {struct_value: {fields: {key: "sent" value: {bool_value: true}}}}}}`,
		},
		{
			name: "release response headers unchanged",
			got:  continueResponseHeaders(mutation{}),
			want: `response_headers: {response: {}}`,
		},
		{
			name: "307 back to the route role",
			got:  continueResponseHeaders(redirectMutation("http://gw/v1/chat/completions", "S")),
			want: `response_headers: {response: {header_mutation: {
				set_headers: [{header: {key: ":status" raw_value: "307"}}, {header: {key: "location" raw_value: "http://gw/v1/chat/completions"}}, {header: {key: "x-switchyard-state" raw_value: "S"}}]
				remove_headers: ["content-type", "content-length", "content-encoding", "retry-after", "retry-after-ms", "set-cookie"]}}}`,
		},
		{
			name: "streamed body chunk",
			got:  streamedBody([]byte("data: x\n\n"), false),
			want: `response_body: {response: {body_mutation: {streamed_response: {body: "data: x\n\n"}}}}`,
		},
		{
			name: "end of a drained body",
			got:  streamedBody(nil, true),
			want: `response_body: {response: {body_mutation: {streamed_response: {end_of_stream: true}}}}`,
		},
		{
			name: "continue trailers",
			got:  continueResponseTrailers(),
			want: `response_trailers: {}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := &extprocv3.ProcessingResponse{}
			if err := prototext.Unmarshal([]byte(tc.want), want); err != nil {
				t.Fatalf("bad expectation: %v", err)
			}
			if !proto.Equal(want, tc.got) {
				t.Errorf("got\n%s\nwant\n%s", prototext.Format(tc.got), prototext.Format(want))
			}
		})
	}
}
