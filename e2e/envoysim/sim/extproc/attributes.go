package extproc

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// attrExpr is one request_attributes / response_attributes entry. Envoy compiles each
// string as a CEL expression (matching_utils.cc ExpressionManager); envoysim has no CEL
// engine, so it accepts the attribute paths listed in
// docs/root/intro/arch_overview/advanced/attributes.rst that switchyard-style
// processors use, and rejects every other expression at config load.
type attrExpr struct {
	raw  string
	kind string   // e.g. "xds.upstream_host_metadata"
	keys []string // ['a']['b'] indexes
}

var attrRoots = map[string]bool{
	// metadata is the request's dynamic metadata (attributes.rst "metadata"): the
	// activation of Filter::addAttributes is built over the filter's StreamInfo, the one
	// addDynamicMetadata forwards from, so an upstream filter reads what the downstream
	// filters wrote.
	"metadata.filter_metadata":                   true,
	"xds.upstream_host_metadata.filter_metadata": true,
	"xds.cluster_metadata.filter_metadata":       true,
	"xds.cluster_name":                           true,
	"xds.route_name":                             true,
	"upstream.request_attempt_count":             true,
	"request.path":                               true,
	"request.url_path":                           true,
	"request.host":                               true,
	"request.method":                             true,
	"request.scheme":                             true,
	"request.id":                                 true,
	"request.useragent":                          true,
	"request.referer":                            true,
	"request.headers":                            true,
	"response.code":                              true,
	"response.headers":                           true,
}

func parseAttrs(exprs []string) ([]*attrExpr, error) {
	var out []*attrExpr
	seen := map[string]bool{}
	for _, e := range exprs {
		if seen[e] {
			continue // ExpressionManager::initExpressions skips duplicates
		}
		seen[e] = true
		a, err := parseAttr(e)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func parseAttr(e string) (*attrExpr, error) {
	s := strings.TrimSpace(e)
	root := s
	var keys []string
	if i := strings.Index(s, "["); i >= 0 {
		root = s[:i]
		rest := s[i:]
		for rest != "" {
			if len(rest) < 4 || rest[0] != '[' || (rest[1] != '\'' && rest[1] != '"') {
				return nil, fmt.Errorf("unsupported attribute expression %q (envoysim evaluates plain attribute paths with ['key'] indexes only)", e)
			}
			q := rest[1]
			end := strings.IndexByte(rest[2:], q)
			if end < 0 || len(rest) < end+4 || rest[2+end+1] != ']' {
				return nil, fmt.Errorf("unsupported attribute expression %q", e)
			}
			keys = append(keys, rest[2:2+end])
			rest = rest[2+end+2:]
		}
	}
	if !attrRoots[root] {
		return nil, fmt.Errorf("unsupported attribute %q: envoysim supports %s", e, supportedAttrList())
	}
	indexed := root == "request.headers" || root == "response.headers" || strings.HasSuffix(root, ".filter_metadata")
	if indexed && len(keys) == 0 {
		return nil, fmt.Errorf("unsupported attribute %q: envoysim needs an index (e.g. %s['key'])", e, root)
	}
	if !indexed && len(keys) > 0 {
		return nil, fmt.Errorf("unsupported attribute expression %q: %s cannot be indexed", e, root)
	}
	if (root == "request.headers" || root == "response.headers") && len(keys) != 1 {
		return nil, fmt.Errorf("unsupported attribute expression %q", e)
	}
	return &attrExpr{raw: e, kind: root, keys: keys}, nil
}

func supportedAttrList() string {
	var ks []string
	for k := range attrRoots {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ", ")
}

// evaluate returns the attribute value, or false when CEL evaluation would fail
// (missing key, no host yet): ExpressionManager::evaluateAttributes skips those.
// Result types follow evaluateAttributes: bool → bool, int/uint → number, anything
// else → its printed string.
func (a *attrExpr) evaluate(src stream.Attributes, md *stream.Metadata, resp *stream.Headers) (*structpb.Value, bool) {
	if a.kind == "metadata.filter_metadata" {
		ns, ok := md.Get(a.keys[0])
		if !ok {
			return nil, false
		}
		return metadataPath(&corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{a.keys[0]: ns}}, a.keys)
	}
	reqH := src.RequestHeaders()
	hdr := func(h *stream.Headers, k string) (*structpb.Value, bool) {
		if h == nil {
			return nil, false
		}
		v, ok := h.Get(k)
		if !ok {
			return nil, false
		}
		return structpb.NewStringValue(v), true
	}
	switch a.kind {
	case "xds.upstream_host_metadata.filter_metadata":
		return metadataPath(src.UpstreamHostMetadata(), a.keys)
	case "xds.cluster_metadata.filter_metadata":
		return metadataPath(src.ClusterMetadata(), a.keys)
	case "xds.cluster_name":
		if src.ClusterName() == "" {
			return nil, false
		}
		return structpb.NewStringValue(src.ClusterName()), true
	case "xds.route_name":
		return structpb.NewStringValue(src.RouteName()), true
	case "upstream.request_attempt_count":
		if src.AttemptCount() == 0 {
			return nil, false
		}
		return structpb.NewNumberValue(float64(src.AttemptCount())), true
	case "request.path":
		return hdr(reqH, ":path")
	case "request.url_path":
		v, ok := hdr(reqH, ":path")
		if ok {
			p := v.GetStringValue()
			if i := strings.IndexByte(p, '?'); i >= 0 {
				p = p[:i]
			}
			return structpb.NewStringValue(p), true
		}
		return nil, false
	case "request.host":
		return hdr(reqH, ":authority")
	case "request.method":
		return hdr(reqH, ":method")
	case "request.scheme":
		return hdr(reqH, ":scheme")
	case "request.id":
		return hdr(reqH, "x-request-id")
	case "request.useragent":
		return hdr(reqH, "user-agent")
	case "request.referer":
		return hdr(reqH, "referer")
	case "request.headers":
		return hdr(reqH, a.keys[0])
	case "response.headers":
		return hdr(resp, a.keys[0])
	case "response.code":
		if resp == nil {
			return nil, false
		}
		n, err := strconv.Atoi(resp.Value(":status"))
		if err != nil {
			return nil, false
		}
		return structpb.NewNumberValue(float64(n)), true
	}
	return nil, false
}

func metadataPath(md *corev3.Metadata, keys []string) (*structpb.Value, bool) {
	ns, ok := md.GetFilterMetadata()[keys[0]]
	if !ok {
		return nil, false
	}
	if len(keys) == 1 {
		return structpb.NewStringValue(ns.String()), true
	}
	v := structpb.NewStructValue(ns)
	for _, k := range keys[1:] {
		s := v.GetStructValue()
		if s == nil {
			return nil, false
		}
		next, ok := s.GetFields()[k]
		if !ok {
			return nil, false
		}
		v = next
	}
	switch x := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return v, true
	case *structpb.Value_BoolValue:
		return v, true
	case *structpb.Value_NumberValue:
		// A protobuf Value number is a CEL double, printed like absl::StrCat (6 digits).
		return structpb.NewStringValue(strconv.FormatFloat(x.NumberValue, 'g', 6, 64)), true
	default:
		return nil, false
	}
}
