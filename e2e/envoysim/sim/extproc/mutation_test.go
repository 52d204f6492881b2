package extproc

import (
	"testing"

	mrv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// Checker::check outcomes for the rules of mutation_rules.proto, in precedence order.
func TestCheckerRules(t *testing.T) {
	re := func(s string) *matcherv3.RegexMatcher { return &matcherv3.RegexMatcher{Regex: s} }
	cases := []struct {
		name  string
		rules *mrv3.HeaderMutationRules
		op    checkOp
		key   string
		value string
		want  checkResult
	}{
		{"plain header", nil, opSet, "x-a", "v", resOK},
		{"routing header", nil, opSet, ":authority", "h", resIgnore},
		{"routing allowed", &mrv3.HeaderMutationRules{AllowAllRouting: wrapperspb.Bool(true)}, opSet, "host", "h", resOK},
		{"envoy header", nil, opSet, "x-envoy-foo", "1", resIgnore},
		{"envoy allowed", &mrv3.HeaderMutationRules{AllowEnvoy: wrapperspb.Bool(true)}, opSet, "x-envoy-foo", "1", resOK},
		{"path set", nil, opSet, ":path", "/x", resOK},
		{"pseudo append", nil, opAppend, ":path", "/x", resIgnore},
		{"pseudo remove", &mrv3.HeaderMutationRules{AllowAllRouting: wrapperspb.Bool(true)}, opRemove, ":authority", "", resIgnore},
		{"host remove", nil, opRemove, "host", "", resIgnore},
		{"status 1xx", nil, opSet, ":status", "100", resIgnore},
		{"status ok", nil, opSet, ":status", "307", resOK},
		{"status not a number", nil, opSet, ":status", "abc", resIgnore},
		{"bad scheme", &mrv3.HeaderMutationRules{AllowAllRouting: wrapperspb.Bool(true)}, opSet, ":scheme", "ftp", resIgnore},
		{"disallow_system", &mrv3.HeaderMutationRules{DisallowSystem: wrapperspb.Bool(true)}, opSet, ":path", "/", resIgnore},
		{"disallow_all", &mrv3.HeaderMutationRules{DisallowAll: wrapperspb.Bool(true)}, opSet, "x-a", "v", resIgnore},
		{"allow_expression beats disallow_all", &mrv3.HeaderMutationRules{DisallowAll: wrapperspb.Bool(true), AllowExpression: re("x-.*")}, opSet, "x-a", "v", resOK},
		{"disallow_expression first", &mrv3.HeaderMutationRules{AllowExpression: re("x-.*"), DisallowExpression: re("x-a")}, opSet, "x-a", "v", resIgnore},
		{"disallow_is_error", &mrv3.HeaderMutationRules{DisallowIsError: wrapperspb.Bool(true)}, opSet, "x-envoy-a", "v", resFail},
		{"bad value", nil, opSet, "x-a", "a\nb", resIgnore},
	}
	for _, c := range cases {
		ch, err := newChecker(c.rules)
		if err != nil {
			t.Fatal(err)
		}
		if got := ch.check(c.op, c.key, c.value); got != c.want {
			t.Errorf("%s: check(%v, %q, %q) = %v, want %v", c.name, c.op, c.key, c.value, got, c.want)
		}
	}
}

// applyHeaderMutations: both value and raw_value is an error; content-length is
// skipped when the mode strips it; too many mutations is an error.
func TestApplyHeaderMutations(t *testing.T) {
	ch, _ := newChecker(nil)
	h := stream.NewHeaders(":path", "/", "content-length", "3")
	both := &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x", Value: "a", RawValue: []byte("b")}}}}
	if err := applyHeaderMutations(both, h, false, ch, false); err == nil {
		t.Fatal("value and raw_value both set accepted")
	}
	cl := &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "content-length", RawValue: []byte("9")}}}}
	if err := applyHeaderMutations(cl, h, false, ch, true); err != nil || h.Value("content-length") != "3" {
		t.Fatalf("content-length changed while stripped: %v %q", err, h.Value("content-length"))
	}
	many := &extprocv3.HeaderMutation{}
	for i := 0; i <= maxHeadersCount; i++ {
		many.RemoveHeaders = append(many.RemoveHeaders, "x")
	}
	if err := applyHeaderMutations(many, h, false, ch, false); err == nil {
		t.Fatal("too many mutations accepted")
	}
	badName := &extprocv3.HeaderMutation{RemoveHeaders: []string{"bad name"}}
	if err := applyHeaderMutations(badName, h, false, ch, false); err == nil {
		t.Fatal("invalid header name accepted")
	}
	method := &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: ":method", RawValue: []byte("PUT")}}}}
	if err := applyHeaderMutations(method, h, true, ch, false); err != nil || h.Value(":method") != "PUT" {
		t.Fatalf("CONTINUE_AND_REPLACE may set :method: %v %q", err, h.Value(":method"))
	}
}

func TestParseAttrs(t *testing.T) {
	a, err := parseAttr(`xds.upstream_host_metadata.filter_metadata["ns"]['key']`)
	if err != nil || a.kind != "xds.upstream_host_metadata.filter_metadata" || len(a.keys) != 2 || a.keys[1] != "key" {
		t.Fatalf("%+v %v", a, err)
	}
	for _, bad := range []string{"request.size", "xds.cluster_name['x']", "request.headers", "has(request.path)"} {
		if _, err := parseAttr(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// metadata.filter_metadata reads the request's dynamic metadata, what a downstream filter
// wrote (switchyard's attempt filter reads the route role's sealed state so); a missing key
// does not evaluate, and Envoy leaves the attribute out.
func TestDynamicMetadataAttribute(t *testing.T) {
	a, err := parseAttr(`metadata.filter_metadata['switchyard']['state']`)
	if err != nil {
		t.Fatal(err)
	}
	md := stream.NewMetadata()
	if _, ok := a.evaluate(nil, md, nil); ok {
		t.Fatal("evaluated with no metadata")
	}
	md.Merge("switchyard", &structpb.Struct{Fields: map[string]*structpb.Value{"state": structpb.NewStringValue("sealed")}})
	if v, ok := a.evaluate(nil, md, nil); !ok || v.GetStringValue() != "sealed" {
		t.Fatalf("evaluated to %v %v", v, ok)
	}
	sent, err := parseAttr(`metadata.filter_metadata['switchyard']['sent']`)
	if err != nil {
		t.Fatal(err)
	}
	md.Merge("switchyard", &structpb.Struct{Fields: map[string]*structpb.Value{"sent": structpb.NewBoolValue(true)}})
	if v, ok := sent.evaluate(nil, md, nil); !ok || !v.GetBoolValue() {
		t.Fatalf("sent evaluated to %v %v", v, ok)
	}
}
