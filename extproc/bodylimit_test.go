package extproc

import (
	"context"
	"strconv"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/tidwall/gjson"
	"google.golang.org/grpc/metadata"

	"github.com/switchyard-gw/switchyard/internal/contract"
)

// TestRouteRoleRefusesADeclaredLengthOverTheLimit: a content-length over MaxRequestBody is
// answered at request headers, before Envoy buffers the body, with the client dialect's 413
// (marked as switchyard's answer for the bootstraps' local_reply_config); one at the limit
// goes on to the body.
func TestRouteRoleRefusesADeclaredLengthOverTheLimit(t *testing.T) {
	cc := newRig(t).serve(t)
	over := strconv.Itoa(contract.DefaultMaxRequestBody + 1)
	for _, tc := range []struct {
		name    string
		headers []string
		shaped  func(b []byte) bool
	}{
		{"chat", []string{":method", "POST", ":path", "/v1/chat/completions", "x-request-id", "r", "content-length", over},
			func(b []byte) bool { return gjson.GetBytes(b, "error.code").String() == "request_too_large" }},
		{"messages", []string{":method", "POST", ":path", "/v1/messages", "anthropic-version", "2023-06-01", "x-request-id", "r", "content-length", over},
			func(b []byte) bool {
				return gjson.GetBytes(b, "type").String() == "error" && gjson.GetBytes(b, "error.type").String() == "request_too_large"
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := metadata.AppendToOutgoingContext(context.Background(), contract.HeaderRole, contract.RoleRoute)
			s, err := extprocv3.NewExternalProcessorClient(cc).Process(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Send(reqHeaders(false, tc.headers...)); err != nil {
				t.Fatal(err)
			}
			a, err := s.Recv()
			if err != nil {
				t.Fatal(err)
			}
			ir := a.GetImmediateResponse()
			if ir.GetStatus().GetCode() != 413 || !tc.shaped(ir.GetBody()) {
				t.Fatalf("answer to the headers %v, want the dialect's 413", a)
			}
			if !a.GetDynamicMetadata().GetFields()[contract.MetadataNamespace].GetStructValue().GetFields()[metaAnswered].GetBoolValue() {
				t.Errorf("dynamic metadata %v, want %s.%s", a.GetDynamicMetadata(), contract.MetadataNamespace, metaAnswered)
			}
		})
	}
	t.Run("at the limit", func(t *testing.T) {
		fs := newRig(t).route(t)
		a := fs.answer(t, reqHeaders(false, ":method", "POST", ":path", "/v1/chat/completions", "x-request-id", "r",
			"content-length", strconv.Itoa(contract.DefaultMaxRequestBody)))
		if a.GetImmediateResponse() != nil {
			t.Fatalf("answer %v, want the headers continued", a)
		}
	})
}
