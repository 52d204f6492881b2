// Package match implements Envoy's StringMatcher and HeaderMatcher
// (envoy/type/matcher/v3/string.proto, envoy/config/route/v3/route_components.proto
// HeaderMatcher; behaviour from source/common/common/matchers.cc and
// source/common/http/header_utility.cc).
package match

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// String is a compiled StringMatcher.
type String struct {
	exact, prefix, suffix, contains *string
	re                              *regexp.Regexp
	ignoreCase                      bool
}

// Regex compiles a RegexMatcher for a full match: Envoy's RE2 matchers match the whole
// string (Regex::CompiledGoogleReMatcher::match uses RE2::FullMatch).
func Regex(m *matcherv3.RegexMatcher) (*regexp.Regexp, error) {
	re, err := regexp.Compile(`^(?:` + m.GetRegex() + `)$`)
	if err != nil {
		return nil, fmt.Errorf("invalid regex %q: %w", m.GetRegex(), err)
	}
	return re, nil
}

// NewString compiles m.
func NewString(m *matcherv3.StringMatcher) (*String, error) {
	s := &String{ignoreCase: m.GetIgnoreCase()}
	fold := func(v string) *string {
		if s.ignoreCase {
			v = strings.ToLower(v)
		}
		return &v
	}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		s.exact = fold(p.Exact)
	case *matcherv3.StringMatcher_Prefix:
		s.prefix = fold(p.Prefix)
	case *matcherv3.StringMatcher_Suffix:
		s.suffix = fold(p.Suffix)
	case *matcherv3.StringMatcher_Contains:
		s.contains = fold(p.Contains)
	case *matcherv3.StringMatcher_SafeRegex:
		re, err := Regex(p.SafeRegex)
		if err != nil {
			return nil, err
		}
		s.re = re
	default:
		return nil, fmt.Errorf("unsupported StringMatcher pattern %T", p)
	}
	return s, nil
}

// Match reports whether v matches.
func (s *String) Match(v string) bool {
	if s.re != nil {
		return s.re.MatchString(v)
	}
	if s.ignoreCase {
		v = strings.ToLower(v)
	}
	switch {
	case s.exact != nil:
		return v == *s.exact
	case s.prefix != nil:
		return strings.HasPrefix(v, *s.prefix)
	case s.suffix != nil:
		return strings.HasSuffix(v, *s.suffix)
	case s.contains != nil:
		return strings.Contains(v, *s.contains)
	}
	return false
}

// Header is a compiled HeaderMatcher.
type Header struct {
	name         string
	invert       bool
	missingEmpty bool
	present      *bool
	rangeStart   int64
	rangeEnd     int64
	isRange      bool
	str          *String
}

// NewHeader compiles m.
func NewHeader(m *routev3.HeaderMatcher) (*Header, error) {
	h := &Header{name: strings.ToLower(m.GetName()), invert: m.GetInvertMatch(), missingEmpty: m.GetTreatMissingHeaderAsEmpty()}
	var err error
	switch p := m.GetHeaderMatchSpecifier().(type) {
	case nil:
		// No specifier: the header only has to be present.
		t := true
		h.present = &t
	case *routev3.HeaderMatcher_PresentMatch:
		v := p.PresentMatch
		h.present = &v
	case *routev3.HeaderMatcher_ExactMatch:
		//lint:ignore SA1019 deprecated but still honoured by Envoy
		h.str, err = NewString(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: p.ExactMatch}})
	case *routev3.HeaderMatcher_PrefixMatch:
		//lint:ignore SA1019 deprecated but still honoured by Envoy
		h.str, err = NewString(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: p.PrefixMatch}})
	case *routev3.HeaderMatcher_SuffixMatch:
		//lint:ignore SA1019 deprecated but still honoured by Envoy
		h.str, err = NewString(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: p.SuffixMatch}})
	case *routev3.HeaderMatcher_ContainsMatch:
		//lint:ignore SA1019 deprecated but still honoured by Envoy
		h.str, err = NewString(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: p.ContainsMatch}})
	case *routev3.HeaderMatcher_SafeRegexMatch:
		//lint:ignore SA1019 deprecated but still honoured by Envoy
		h.str, err = NewString(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: p.SafeRegexMatch}})
	case *routev3.HeaderMatcher_StringMatch:
		h.str, err = NewString(p.StringMatch)
	case *routev3.HeaderMatcher_RangeMatch:
		h.isRange, h.rangeStart, h.rangeEnd = true, p.RangeMatch.GetStart(), p.RangeMatch.GetEnd()
	default:
		return nil, fmt.Errorf("unsupported HeaderMatcher specifier %T", p)
	}
	if err != nil {
		return nil, err
	}
	return h, nil
}

// Matches evaluates the matcher against headers. Multiple values are joined with ","
// (HeaderUtility::getAllOfHeaderAsString).
func (h *Header) Matches(headers *stream.Headers) bool {
	vals := headers.Values(h.name)
	present := len(vals) > 0
	if !present && !h.missingEmpty {
		if h.present != nil {
			return h.invert != !*h.present
		}
		return false
	}
	v := strings.Join(vals, ",")
	var ok bool
	switch {
	case h.present != nil:
		ok = *h.present == present
	case h.isRange:
		n, err := strconv.ParseInt(v, 10, 64)
		ok = err == nil && n >= h.rangeStart && n < h.rangeEnd
	case h.str != nil:
		ok = h.str.Match(v)
	}
	return ok != h.invert
}
