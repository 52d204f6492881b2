package extproc

import (
	"regexp"
	"strconv"
	"strings"

	mrv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/match"
	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// Header limits come from the header map (HeaderMap::maxHeadersCount/maxHeadersKb,
// stream.Headers.Limits), as the codec that made it gave them: the HCM's
// common_http_protocol_options.max_headers_count (default 100) and
// max_request_headers_kb (default 60) for request headers and trailers (the server
// codec); the cluster's for response headers and trailers (the upstream codec,
// ClientConnectionImpl with ClusterInfo::maxResponseHeadersCount), which envoysim does
// not accept, so Envoy's defaults, 100 and 60 KiB. MutationUtils::responseHeaderSizeCheck
// and headerMutationResultCheck use them for headers and trailers alike.
const maxHeadersCount = stream.DefaultMaxHeadersCount

type checkOp int

const (
	opSet checkOp = iota
	opAppend
	opRemove
)

type checkResult int

const (
	resOK checkResult = iota
	resIgnore
	resFail
)

// checker imitates Filters::Common::MutationRules::Checker
// (source/extensions/filters/common/mutation_rules/mutation_rules.cc) for
// envoy.config.common.mutation_rules.v3.HeaderMutationRules.
type checker struct {
	rules         *mrv3.HeaderMutationRules
	allowRe       *regexp.Regexp
	disallowRe    *regexp.Regexp
	allowRouting  bool
	allowEnvoy    bool
	disallowSys   bool
	disallowAll   bool
	disallowIsErr bool
}

func newChecker(r *mrv3.HeaderMutationRules) (*checker, error) {
	c := &checker{
		rules:         r,
		allowRouting:  r.GetAllowAllRouting().GetValue(),
		allowEnvoy:    r.GetAllowEnvoy().GetValue(),
		disallowSys:   r.GetDisallowSystem().GetValue(),
		disallowAll:   r.GetDisallowAll().GetValue(),
		disallowIsErr: r.GetDisallowIsError().GetValue(),
	}
	var err error
	if r.GetAllowExpression() != nil {
		if c.allowRe, err = match.Regex(r.GetAllowExpression()); err != nil {
			return nil, err
		}
	}
	if r.GetDisallowExpression() != nil {
		if c.disallowRe, err = match.Regex(r.GetDisallowExpression()); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Routing headers that need allow_all_routing (Checker ExtraRoutingHeaders).
var routingHeaders = map[string]bool{"host": true, ":authority": true, ":method": true, ":scheme": true}

// check imitates Checker::check.
func (c *checker) check(op checkOp, name, value string) checkResult {
	if c.isAllowed(op, name) && (op == opRemove || isValidValue(name, value)) {
		return resOK
	}
	if c.disallowIsErr {
		return resFail
	}
	return resIgnore
}

// isAllowed imitates Checker::isAllowed, in its order of precedence.
func (c *checker) isAllowed(op checkOp, name string) bool {
	// HeaderUtility::isModifiableHeader: never remove "host" or any ":" header.
	if op == opRemove && (strings.HasPrefix(name, ":") || name == "host") {
		return false
	}
	if c.disallowRe != nil && c.disallowRe.MatchString(name) {
		return false
	}
	if c.allowRe != nil && c.allowRe.MatchString(name) {
		return true
	}
	if c.disallowAll {
		return false
	}
	if !c.allowRouting && routingHeaders[name] {
		return false
	}
	if strings.HasPrefix(name, ":") && (op == opAppend || c.disallowSys) {
		return false
	}
	// Http::Headers::get().prefix() is "x-envoy" unless the bootstrap sets
	// header_prefix (rejected by envoysim's allow-list).
	if !c.allowEnvoy && strings.HasPrefix(name, "x-envoy") {
		return false
	}
	return true
}

// isValidValue imitates Checker::isValidValue.
func isValidValue(name, value string) bool {
	if !strings.HasPrefix(name, ":") && !headerValueIsValid(value) {
		return false
	}
	switch name {
	case "host", ":authority":
		return authorityIsValid(value)
	case ":scheme":
		return value == "http" || value == "https"
	case ":status":
		n, err := strconv.ParseUint(value, 10, 32)
		return err == nil && n >= 200
	}
	return true
}

// headerNameIsValid imitates HeaderUtility::headerNameIsValid
// (source/common/http/header_utility.cc): every character a token character,
// optionally after a leading ':' that must be followed by something. The loop over an
// empty name finds nothing invalid, so "" is valid.
func headerNameIsValid(n string) bool {
	if strings.HasPrefix(n, ":") {
		n = n[1:]
		if n == "" {
			return false
		}
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// headerValueIsValid imitates HeaderUtility::headerValueIsValid (no NUL, CR, LF or
// other control characters except horizontal tab).
func headerValueIsValid(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// authorityIsValid imitates HeaderUtility::authorityIsValid (a host, optionally with a
// port, without characters that are not allowed in an authority).
func authorityIsValid(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c <= 0x20 || c >= 0x7f || strings.ContainsRune("\"#/<>?@\\^`{|}", rune(c)) {
			return false
		}
	}
	return true
}

// applyHeaderMutations imitates MutationUtils::applyHeaderMutations
// (source/extensions/filters/http/ext_proc/mutation_utils.cc): the count check
// (responseHeaderSizeCheck: more remove_headers or set_headers entries than the map's
// max_headers_count reject the whole mutation, for headers and trailers of either
// direction), removes first, then sets; raw_value only; only the deprecated `append`
// flag is honoured (append_action is ignored by ext_proc, envoy#36982); content-length
// sets are skipped when the body mode strips content-length.
func applyHeaderMutations(m *extprocv3.HeaderMutation, h *stream.Headers, replacingMessage bool, c *checker, removeContentLength bool) error {
	maxCount, maxBytes := h.Limits()
	if len(m.GetRemoveHeaders()) > maxCount || len(m.GetSetHeaders()) > maxCount {
		return envoyErrorf("Header mutation remove header count %d or set header count %d exceed the HCM header countlimit %d",
			len(m.GetRemoveHeaders()), len(m.GetSetHeaders()), maxCount)
	}
	for _, name := range m.GetRemoveHeaders() {
		// An empty name passes the name check and removes nothing (headers.remove("")).
		if !headerNameIsValid(name) {
			return envoyError("Invalid character in remove_headers mutation.")
		}
		name = strings.ToLower(name)
		switch c.check(opRemove, name, "") {
		case resOK:
			h.Del(name)
		case resIgnore:
			// rejected_header_mutations++; the mutation is skipped.
		case resFail:
			return envoyErrorf("Invalid attempt to remove %s", name)
		}
	}
	for _, sh := range m.GetSetHeaders() {
		hv := sh.GetHeader()
		if hv == nil {
			continue
		}
		name := strings.ToLower(hv.GetKey())
		// Skipped before any other check (remove_content_length).
		if removeContentLength && name == "content-length" {
			continue
		}
		if hv.GetValue() != "" && len(hv.GetRawValue()) > 0 {
			return envoyError("Only one of value or raw_value in the HeaderValue message should be set.")
		}
		// send_header_raw_value (default true since 1.27): only raw_value is read, so a
		// mutation that only sets `value` writes an empty header (envoy#31555).
		value := string(hv.GetRawValue())
		// Envoy accepts an empty key here and sets a header without a name; envoysim
		// refuses it like an invalid one (README "Not modelled").
		if hv.GetKey() == "" || !headerNameIsValid(hv.GetKey()) || !headerValueIsValid(value) {
			return envoyError("Invalid character in set_headers mutation.")
		}
		//lint:ignore SA1019 ext_proc honours only the deprecated append flag (envoy#36982)
		appendMode := sh.GetAppend().GetValue()
		op := opSet
		if appendMode && h.Has(name) {
			op = opAppend
		}
		res := c.check(op, name, value)
		// CONTINUE_AND_REPLACE may always change :method (compatibility special case).
		if replacingMessage && name == ":method" {
			res = resOK
		}
		switch res {
		case resOK:
			if appendMode {
				h.Add(name, value)
			} else {
				h.Set(name, value)
			}
		case resIgnore:
		case resFail:
			return envoyErrorf("Invalid attempt to modify %s", name)
		}
	}
	// headerMutationResultCheck.
	if h.Len() > maxCount || h.ByteSize() > maxBytes {
		return envoyErrorf("Header mutation causes end result header count %d or header size %d bytes, exceeding the count limit %d or the size limit %d kilobytes",
			h.Len(), h.ByteSize(), maxCount, maxBytes/1024)
	}
	return nil
}

// applyBodyMutation imitates MutationUtils::applyBodyMutations.
func applyBodyMutation(m *extprocv3.BodyMutation, buf []byte) []byte {
	switch x := m.GetMutation().(type) {
	case *extprocv3.BodyMutation_ClearBody:
		if x.ClearBody {
			return []byte{}
		}
	case *extprocv3.BodyMutation_Body:
		return append([]byte{}, x.Body...)
	}
	return buf
}
