package sim_test

import (
	"strings"
	"testing"

	// Registered in the type registry but not implemented: must be rejected by name.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/buffer/v3"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim"
)

// The bootstrap the project ships loads and compiles (LoadFile + New).
func TestLoadShippedBootstrap(t *testing.T) {
	bs, err := sim.LoadFile("../../../envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.New(bs); err != nil {
		t.Fatal(err)
	}
	if got := bs.GetStaticResources().GetListeners()[0].GetName(); got != "ingress" {
		t.Fatalf("listener %q", got)
	}
}

// Anything envoysim cannot faithfully run is rejected with an error naming it.
func TestLoadRejects(t *testing.T) {
	base := cfg{procAddr: "127.0.0.1:9002", filters: []string{extProcYAML("route", "request_header_mode: SEND")}}.yaml()
	cases := []struct {
		name, from, to, want string
		atNew                bool
	}{
		{"unknown field", "stat_prefix: ingress", "stat_prefix: ingress\n          bogus_field: 1", `unknown field "bogus_field"`, false},
		{"unsupported field", "stat_prefix: ingress", "stat_prefix: ingress\n          request_headers_timeout: 5s", "HttpConnectionManager.request_headers_timeout is not supported", false},
		{"unsupported route field", "cluster_header: x-cluster", "cluster_header: x-cluster, hash_policy: [{header: {header_name: x}}]", "RouteAction.hash_policy is not supported", false},
		{"unsupported extension", "- {name: envoy.filters.http.router",
			"- {name: buffer, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer, max_request_bytes: 10}}\n          - {name: envoy.filters.http.router",
			"extension type envoy.extensions.filters.http.buffer.v3.Buffer is not supported", false},
		{"unregistered extension", "- {name: envoy.filters.http.router",
			"- {name: lua, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua}}\n          - {name: envoy.filters.http.router",
			"envoy.extensions.filters.http.lua.v3.Lua", false},
		{"PGV violation", "cluster_header: x-cluster", `cluster_header: x-cluster, retry_policy: {retry_priority: {name: p, typed_config: {"@type": type.googleapis.com/envoy.extensions.retry.priority.previous_priorities.v3.PreviousPrioritiesConfig, update_frequency: 0}}}`, "UpdateFrequency", false},
		{"full duplex needs trailers", "processing_mode: {request_header_mode: SEND}", "processing_mode: {request_header_mode: SEND, request_body_mode: FULL_DUPLEX_STREAMED}",
			"request_trailer_mode has to be set to SEND", true},
		{"unknown ext_proc cluster", "cluster_name: extproc}", "cluster_name: nope}", `unknown gRPC client cluster "nope"`, true},
		{"router not last", "          - {name: envoy.filters.http.router, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}\n", "", "non-terminal filter", true},
		{"unsupported attribute", "processing_mode: {request_header_mode: SEND}", "processing_mode: {request_header_mode: SEND}, request_attributes: [\"connection.mtls\"]", `unsupported attribute "connection.mtls"`, true},
		{"unsupported retry_on", "cluster_header: x-cluster", "cluster_header: x-cluster, retry_policy: {retry_on: \"5xx,grpc-unavailable\"}", "retry_on", true},
		{"skip_xff_append", "stat_prefix: ingress", "stat_prefix: ingress\n          use_remote_address: true\n          skip_xff_append: true", "HttpConnectionManager.skip_xff_append is not supported", false},
		{"direct_response Location", "route: {cluster_header: x-cluster}", "direct_response: {status: 302}", "direct_response status 302", true},
		{"direct_response file body", "route: {cluster_header: x-cluster}", "direct_response: {status: 200, body: {filename: /etc/hostname}}", "DataSource.filename is not supported", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(base, c.from) {
				t.Fatalf("test bug: %q not in base config", c.from)
			}
			y := strings.Replace(base, c.from, c.to, 1)
			bs, err := sim.Load([]byte(y))
			if err == nil && c.atNew {
				_, err = sim.New(bs)
			}
			if err == nil {
				t.Fatalf("accepted:\n%s", y)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
}
