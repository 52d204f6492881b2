package sim

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/match"
	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// localReplyConfig is the HCM's local_reply_config (source/common/local_reply/local_reply.cc,
// LocalReplyImpl): the first mapper whose filter matches may change the status and pick a
// body format; the body is then formatted with it, or with body_format, or kept as is
// (text/plain).
type localReplyConfig struct {
	mappers []responseMapper
	body    *bodyFormat // nil: %LOCAL_REPLY_BODY% as text/plain
}

// responseMapper is ResponseMapperImpl: filter, status_code, body_format_override.
type responseMapper struct {
	filter replyFilter
	status int // 0: unchanged
	body   *bodyFormat
}

// replyContext is what the access-log filters of a mapper see.
type replyContext struct {
	request *stream.Headers
	code    int
	md      *stream.Metadata
}

type replyFilter func(replyContext) bool

// bodyFormat is a SubstitutionFormatString: text_format or json_format, content_type
// (default text/plain, application/json for json_format; local_reply.cc BodyFormatter).
type bodyFormat struct {
	text        string
	json        *structpb.Struct
	contentType string
}

var formatCommand = regexp.MustCompile(`%[A-Z_]+(\([^)%]*\))?%`)

func compileLocalReply(pb *hcmv3.LocalReplyConfig) (*localReplyConfig, error) {
	if pb == nil {
		return nil, nil
	}
	c := &localReplyConfig{}
	var err error
	if pb.GetBodyFormat() != nil {
		if c.body, err = compileBodyFormat(pb.GetBodyFormat()); err != nil {
			return nil, fmt.Errorf("local_reply_config.body_format: %w", err)
		}
	}
	for i, m := range pb.GetMappers() {
		rm := responseMapper{status: int(m.GetStatusCode().GetValue())}
		if rm.filter, err = compileReplyFilter(m.GetFilter()); err != nil {
			return nil, fmt.Errorf("local_reply_config.mappers[%d].filter: %w", i, err)
		}
		if m.GetBodyFormatOverride() != nil {
			if rm.body, err = compileBodyFormat(m.GetBodyFormatOverride()); err != nil {
				return nil, fmt.Errorf("local_reply_config.mappers[%d].body_format_override: %w", i, err)
			}
		}
		c.mappers = append(c.mappers, rm)
	}
	return c, nil
}

// compileReplyFilter compiles the AccessLogFilter kinds envoysim implements
// (source/common/access_log/access_log_impl.cc): status_code_filter, header_filter (on the
// request headers), metadata_filter (dynamic metadata), and_filter, or_filter.
func compileReplyFilter(pb *accesslogv3.AccessLogFilter) (replyFilter, error) {
	switch f := pb.GetFilterSpecifier().(type) {
	case *accesslogv3.AccessLogFilter_StatusCodeFilter:
		cmp := f.StatusCodeFilter.GetComparison()
		if cmp.GetValue().GetRuntimeKey() != "" {
			return nil, fmt.Errorf("status_code_filter: runtime_key is not supported by envoysim")
		}
		v := int(cmp.GetValue().GetDefaultValue())
		// ComparisonFilter (StatusCodeFilter::evaluate): EQ, GE, LE against the response code.
		switch cmp.GetOp() {
		case accesslogv3.ComparisonFilter_EQ:
			return func(c replyContext) bool { return c.code == v }, nil
		case accesslogv3.ComparisonFilter_GE:
			return func(c replyContext) bool { return c.code >= v }, nil
		case accesslogv3.ComparisonFilter_LE:
			return func(c replyContext) bool { return c.code <= v }, nil
		}
		return nil, fmt.Errorf("status_code_filter: op %v", cmp.GetOp())
	case *accesslogv3.AccessLogFilter_HeaderFilter:
		m, err := match.NewHeader(f.HeaderFilter.GetHeader())
		if err != nil {
			return nil, fmt.Errorf("header_filter: %w", err)
		}
		return func(c replyContext) bool { return c.request != nil && m.Matches(c.request) }, nil
	case *accesslogv3.AccessLogFilter_MetadataFilter:
		return compileMetadataFilter(f.MetadataFilter)
	case *accesslogv3.AccessLogFilter_AndFilter, *accesslogv3.AccessLogFilter_OrFilter:
		var subs []*accesslogv3.AccessLogFilter
		and := false
		if a, ok := f.(*accesslogv3.AccessLogFilter_AndFilter); ok {
			subs, and = a.AndFilter.GetFilters(), true
		} else {
			subs = f.(*accesslogv3.AccessLogFilter_OrFilter).OrFilter.GetFilters()
		}
		var fs []replyFilter
		for i, s := range subs {
			sf, err := compileReplyFilter(s)
			if err != nil {
				return nil, fmt.Errorf("filters[%d]: %w", i, err)
			}
			fs = append(fs, sf)
		}
		return func(c replyContext) bool {
			for _, sf := range fs {
				if sf(c) != and {
					return !and
				}
			}
			return and
		}, nil
	}
	return nil, fmt.Errorf("filter %T is not supported by envoysim", pb.GetFilterSpecifier())
}

// compileMetadataFilter is MetadataFilter::evaluate: a key present in the dynamic metadata
// matches when its value matches matcher.value; an absent key gives match_if_key_not_found
// (default true). Value matchers: present_match, bool_match, string_match.
func compileMetadataFilter(pb *accesslogv3.MetadataFilter) (replyFilter, error) {
	notFound := true
	if v := pb.GetMatchIfKeyNotFound(); v != nil {
		notFound = v.GetValue()
	}
	ns := pb.GetMatcher().GetFilter()
	var path []string
	for _, s := range pb.GetMatcher().GetPath() {
		path = append(path, s.GetKey())
	}
	if pb.GetMatcher().GetInvert() {
		return nil, fmt.Errorf("metadata_filter: matcher.invert is not used by MetadataFilter; not supported by envoysim")
	}
	var valueMatch func(*structpb.Value) bool
	switch m := pb.GetMatcher().GetValue().GetMatchPattern().(type) {
	case *matcherv3.ValueMatcher_PresentMatch:
		valueMatch = func(*structpb.Value) bool { return m.PresentMatch }
	case *matcherv3.ValueMatcher_BoolMatch:
		valueMatch = func(v *structpb.Value) bool {
			b, ok := v.GetKind().(*structpb.Value_BoolValue)
			return ok && b.BoolValue == m.BoolMatch
		}
	case *matcherv3.ValueMatcher_StringMatch:
		sm, err := match.NewString(m.StringMatch)
		if err != nil {
			return nil, fmt.Errorf("metadata_filter: %w", err)
		}
		valueMatch = func(v *structpb.Value) bool {
			s, ok := v.GetKind().(*structpb.Value_StringValue)
			return ok && sm.Match(s.StringValue)
		}
	default:
		return nil, fmt.Errorf("metadata_filter: value matcher %T is not supported by envoysim", m)
	}
	return func(c replyContext) bool {
		v := metadataValue(c.md, ns, path)
		if v == nil {
			return notFound
		}
		return valueMatch(v)
	}, nil
}

// metadataValue is Config::Metadata::metadataValue: the value at path in namespace ns, nil
// when absent.
func metadataValue(md *stream.Metadata, ns string, path []string) *structpb.Value {
	if md == nil || len(path) == 0 {
		return nil
	}
	s, ok := md.Get(ns)
	if !ok {
		return nil
	}
	var v *structpb.Value
	for i, k := range path {
		v = s.GetFields()[k]
		if v == nil {
			return nil
		}
		if i < len(path)-1 {
			if s = v.GetStructValue(); s == nil {
				return nil
			}
		}
	}
	return v
}

func compileBodyFormat(pb *corev3.SubstitutionFormatString) (*bodyFormat, error) {
	b := &bodyFormat{contentType: pb.GetContentType()}
	var strs []string
	switch f := pb.GetFormat().(type) {
	case *corev3.SubstitutionFormatString_TextFormat:
		//lint:ignore SA1019 Envoy 1.37/1.38 still accept text_format; the simulator reads what bootstraps carry.
		b.text = f.TextFormat
		strs = []string{b.text}
		if b.contentType == "" {
			b.contentType = "text/plain"
		}
	case *corev3.SubstitutionFormatString_JsonFormat:
		b.json = f.JsonFormat
		strs = jsonStrings(f.JsonFormat, nil)
		if b.contentType == "" {
			b.contentType = "application/json"
		}
	default:
		return nil, fmt.Errorf("format %T is not supported by envoysim", f)
	}
	for _, s := range strs {
		for _, cmd := range formatCommand.FindAllString(s, -1) {
			if _, ok := replyCommands[cmd]; !ok {
				return nil, fmt.Errorf("command %s is not supported by envoysim", cmd)
			}
		}
	}
	return b, nil
}

func jsonStrings(s *structpb.Struct, out []string) []string {
	for _, v := range s.GetFields() {
		switch k := v.GetKind().(type) {
		case *structpb.Value_StringValue:
			out = append(out, k.StringValue)
		case *structpb.Value_StructValue:
			out = jsonStrings(k.StructValue, out)
		}
	}
	return out
}

// replyCommands are the substitution commands envoysim formats.
var replyCommands = map[string]struct{}{"%LOCAL_REPLY_BODY%": {}, "%RESPONSE_CODE%": {}, "%RESPONSE_CODE_DETAILS%": {}}

// replyValues are a local reply's values of replyCommands.
type replyValues struct {
	body    string
	code    int
	details string
}

func (v replyValues) substitute(s string) string {
	return strings.NewReplacer("%LOCAL_REPLY_BODY%", v.body, "%RESPONSE_CODE%", strconv.Itoa(v.code),
		"%RESPONSE_CODE_DETAILS%", v.details).Replace(s)
}

// format renders b. A json_format string that is one command alone keeps the command's
// type (%RESPONSE_CODE% a number), as Envoy's typed JSON formatter does; the JSON is
// followed by a newline (source/common/formatter/substitution_formatter.h,
// JsonFormatterImpl).
func (b *bodyFormat) format(v replyValues) string {
	if b.json == nil {
		return v.substitute(b.text)
	}
	out, _ := json.Marshal(b.jsonValue(b.json, v)) // maps of strings and numbers only
	return string(out) + "\n"
}

func (b *bodyFormat) jsonValue(s *structpb.Struct, v replyValues) map[string]any {
	m := make(map[string]any, len(s.GetFields()))
	for k, f := range s.GetFields() {
		switch x := f.GetKind().(type) {
		case *structpb.Value_StringValue:
			if x.StringValue == "%RESPONSE_CODE%" {
				m[k] = v.code
			} else {
				m[k] = v.substitute(x.StringValue)
			}
		case *structpb.Value_StructValue:
			m[k] = b.jsonValue(x.StructValue, v)
		default:
			m[k] = f.AsInterface()
		}
	}
	return m
}

// rewrite is LocalReplyImpl::rewrite: it returns the reply's status, body and the
// content-type to set (text/plain when nothing formats it). Utility::prepareLocalReply
// then sets that content-type when the body changed or has none.
func (c *localReplyConfig) rewrite(ctx replyContext, r *stream.LocalReply) (code int, body, contentType string) {
	code, body = r.Status, r.Body
	if c == nil {
		return code, body, "text/plain"
	}
	ctx.code = code
	var final *bodyFormat
	for _, m := range c.mappers {
		if !m.filter(ctx) {
			continue
		}
		if m.status != 0 {
			code = m.status
		}
		final = m.body
		break
	}
	if final == nil {
		final = c.body
	}
	if final == nil {
		return code, body, "text/plain"
	}
	return code, final.format(replyValues{body: body, code: code, details: r.Details}), final.contentType
}
