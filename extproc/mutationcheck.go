package extproc

import (
	"strconv"
	"strings"
)

// Envoy applies a header mutation only where the filter's mutation_rules allow it
// (source/extensions/filters/common/mutation_rules/mutation_rules.cc Checker::isAllowed and
// isValidValue; source/extensions/filters/http/ext_proc/mutation_utils.cc
// applyHeaderMutations). Upstream, a rejected mutation is worse than useless: with
// disallow_is_error it is the filter's own error reply, which Envoy ignores there, and the
// client hangs (ext_proc.cc sendImmediateResponse). So every mutation switchyard sends is
// checked against the rules it configures, and whatever Envoy would refuse is dropped.

// mutationRules are the mutation_rules fields switchyard's filters set.
type mutationRules struct {
	allowAllRouting bool // :authority, :method, :scheme, host
	allowEnvoy      bool // x-envoy-*
}

var (
	// routeRules: the route role sets the cluster header and x-envoy-upstream-rq-*.
	routeRules = mutationRules{allowEnvoy: true}
	// attemptRules: the attempt role sets the provider's :authority.
	attemptRules = mutationRules{allowAllRouting: true}
)

// maxMutationHeaders is the HCM's default max_headers_count: a mutation with more sets or
// removes is an error (mutation_utils.cc).
const maxMutationHeaders = 100

// refused says why Envoy would refuse to set (value != nil) or remove a header, or "".
func (r mutationRules) refused(name string, value *string) string {
	if !validName(name) {
		return "invalid header name"
	}
	switch {
	case value == nil && (strings.HasPrefix(name, ":") || name == "host"):
		return "pseudo-headers and host cannot be removed"
	case !r.allowAllRouting && (name == ":authority" || name == "host" || name == ":method" || name == ":scheme"):
		return "routing header needs allow_all_routing"
	case !r.allowEnvoy && strings.HasPrefix(name, "x-envoy"):
		return "x-envoy header needs allow_envoy"
	case value != nil && strings.HasPrefix(name, ":") && !knownPseudo(name):
		return "unknown pseudo-header"
	}
	if value == nil {
		return ""
	}
	if !validValue(*value) {
		return "invalid header value"
	}
	switch name {
	case ":status":
		if n, err := strconv.Atoi(*value); err != nil || n < 200 || n > 999 {
			return ":status must be a number from 200"
		}
	case ":authority", "host":
		if *value == "" || strings.ContainsAny(*value, "/?#@ ") {
			return "invalid authority"
		}
	case ":scheme":
		if *value != "http" && *value != "https" {
			return "invalid scheme"
		}
	case ":path":
		if !strings.HasPrefix(*value, "/") {
			return "path must start with /"
		}
	}
	return ""
}

func knownPseudo(name string) bool {
	switch name {
	case ":path", ":status", ":authority", ":method", ":scheme":
		return true
	}
	return false
}

// validName: lower-case RFC 9110 token characters, optionally after one leading ':'.
func validName(name string) bool {
	name = strings.TrimPrefix(name, ":")
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validValue: no NUL, CR or LF (HeaderUtility::headerValueIsValid).
func validValue(v string) bool {
	return !strings.ContainsAny(v, "\x00\r\n")
}

// sanitize returns m without the entries Envoy would refuse under r, and what it dropped.
func (r mutationRules) sanitize(m mutation) (mutation, []string) {
	var out mutation
	var dropped []string
	for _, name := range m.remove {
		name = strings.ToLower(name)
		if why := r.refused(name, nil); why != "" {
			dropped = append(dropped, "remove "+name+": "+why)
			continue
		}
		out.remove = append(out.remove, name)
	}
	for _, h := range m.set {
		h.Name = strings.ToLower(h.Name)
		if why := r.refused(h.Name, &h.Value); why != "" {
			dropped = append(dropped, "set "+h.Name+": "+why)
			continue
		}
		out.set = append(out.set, h)
	}
	if len(out.remove) > maxMutationHeaders {
		dropped = append(dropped, "removes over the header count limit")
		out.remove = out.remove[:maxMutationHeaders]
	}
	if len(out.set) > maxMutationHeaders {
		dropped = append(dropped, "sets over the header count limit")
		out.set = out.set[:maxMutationHeaders]
	}
	return out, dropped
}
