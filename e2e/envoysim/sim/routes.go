package sim

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/match"
	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// routeTable is a compiled RouteConfiguration (source/common/router/config_impl.cc).
type routeTable struct {
	name   string
	vhosts []*virtualHost
}

type virtualHost struct {
	name                 string
	exact                map[string]bool
	suffixes             []string // "*.example.com" → ".example.com"
	prefixes             []string // "foo.*" → "foo."
	any                  bool
	routes               []*route
	retry                *retryPolicy
	includeAttemptCount  bool
	includeAttemptInResp bool
	bufferLimit          int64
}

type route struct {
	name          string
	vh            *virtualHost
	prefix        *string
	path          *string
	regex         *regexp.Regexp
	caseSensitive bool
	headers       []*match.Header

	cluster       string
	clusterHeader string
	notFoundCode  int
	timeout       time.Duration
	retry         *retryPolicy
	redirect      *redirectPolicy
	bufferLimit   int64          // 0 = not set
	idleTimeout   *time.Duration // RouteAction.idle_timeout; nil = the HCM's stream_idle_timeout
	direct        *directResponse
	// removeResponse is Route.response_headers_to_remove (finalizeResponseHeaders).
	removeResponse []string
}

// redirectPolicy is a compiled InternalRedirectPolicy.
type redirectPolicy struct {
	codes              map[int]bool
	maxRedirects       int
	allowCrossScheme   bool
	copyResponseHeader []string
}

// resolvedRoute is the result of route matching for one request: the route and the
// cluster name, fixed at resolution time. With cluster_header the header is read
// when the route is resolved (RouteEntryImplBase::clusterEntry), which is why a later
// header change needs clear_route_cache to take effect.
type resolvedRoute struct {
	route   *route
	cluster string
}

// compileRouteTable imitates ConfigImpl/VirtualHostImpl construction in config_impl.cc.
func compileRouteTable(rc *routev3.RouteConfiguration) (*routeTable, error) {
	rt := &routeTable{name: rc.GetName()}
	for _, vpb := range rc.GetVirtualHosts() {
		vh := &virtualHost{
			name:                 vpb.GetName(),
			exact:                map[string]bool{},
			includeAttemptCount:  vpb.GetIncludeRequestAttemptCount(),
			includeAttemptInResp: vpb.GetIncludeAttemptCountInResponse(),
			//lint:ignore SA1019 per_request_buffer_limit_bytes is deprecated but still honoured by Envoy
			bufferLimit: bufferLimitOf(vpb.GetRequestBodyBufferLimit().GetValue(), uint64(vpb.GetPerRequestBufferLimitBytes().GetValue())),
		}
		for _, d := range vpb.GetDomains() {
			d = strings.ToLower(d)
			switch {
			case d == "*":
				vh.any = true
			case strings.HasPrefix(d, "*"):
				vh.suffixes = append(vh.suffixes, d[1:])
			case strings.HasSuffix(d, "*"):
				vh.prefixes = append(vh.prefixes, d[:len(d)-1])
			default:
				vh.exact[d] = true
			}
		}
		if vpb.GetRetryPolicy() != nil {
			rp, err := compileRetryPolicy(vpb.GetRetryPolicy())
			if err != nil {
				return nil, fmt.Errorf("virtual host %q: %w", vh.name, err)
			}
			vh.retry = rp
		}
		for i, rpb := range vpb.GetRoutes() {
			r, err := compileRoute(vh, rpb)
			if err != nil {
				return nil, fmt.Errorf("virtual host %q route %d: %w", vh.name, i, err)
			}
			vh.routes = append(vh.routes, r)
		}
		rt.vhosts = append(rt.vhosts, vh)
	}
	return rt, nil
}

func bufferLimitOf(requestBodyLimit, perRequestLimit uint64) int64 {
	if requestBodyLimit > 0 {
		return int64(requestBodyLimit)
	}
	return int64(perRequestLimit)
}

// compileRoute imitates RouteEntryImplBase construction (defaults from
// route_components.proto: timeout 15 s, cluster_not_found_response_code 503,
// max_internal_redirects 1, redirect_response_codes [302]).
func compileRoute(vh *virtualHost, rpb *routev3.Route) (*route, error) {
	r := &route{
		name:          rpb.GetName(),
		vh:            vh,
		caseSensitive: true,
		notFoundCode:  503, // cluster_not_found_response_code default SERVICE_UNAVAILABLE
		timeout:       15 * time.Second,
		retry:         vh.retry,
		//lint:ignore SA1019 per_request_buffer_limit_bytes is deprecated but still honoured by Envoy
		bufferLimit: bufferLimitOf(rpb.GetRequestBodyBufferLimit().GetValue(), uint64(rpb.GetPerRequestBufferLimitBytes().GetValue())),
	}
	if r.bufferLimit == 0 {
		r.bufferLimit = vh.bufferLimit
	}
	m := rpb.GetMatch()
	if cs := m.GetCaseSensitive(); cs != nil {
		r.caseSensitive = cs.GetValue()
	}
	switch p := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		v := p.Prefix
		r.prefix = &v
	case *routev3.RouteMatch_Path:
		v := p.Path
		r.path = &v
	case *routev3.RouteMatch_SafeRegex:
		re, err := match.Regex(p.SafeRegex)
		if err != nil {
			return nil, err
		}
		r.regex = re
	default:
		return nil, fmt.Errorf("route match %T is not supported by envoysim", p)
	}
	for _, hm := range m.GetHeaders() {
		h, err := match.NewHeader(hm)
		if err != nil {
			return nil, err
		}
		r.headers = append(r.headers, h)
	}
	for _, h := range rpb.GetResponseHeadersToRemove() {
		// HeaderParser::configure refuses these (source/common/router/header_parser.cc).
		h = strings.ToLower(h)
		if strings.HasPrefix(h, ":") || h == "host" {
			return nil, fmt.Errorf("route %q: response_headers_to_remove: :-prefixed or host headers may not be removed", r.name)
		}
		r.removeResponse = append(r.removeResponse, h)
	}
	if dr := rpb.GetDirectResponse(); dr != nil {
		d, err := compileDirectResponse(dr)
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", r.name, err)
		}
		r.direct = d
		return r, nil
	}
	act := rpb.GetRoute()
	if act == nil {
		return nil, fmt.Errorf("route %q: only route and direct_response actions are supported by envoysim", r.name)
	}
	if it := act.GetIdleTimeout(); it != nil {
		d := it.AsDuration()
		r.idleTimeout = &d
	}
	switch cs := act.GetClusterSpecifier().(type) {
	case *routev3.RouteAction_Cluster:
		r.cluster = cs.Cluster
	case *routev3.RouteAction_ClusterHeader:
		r.clusterHeader = strings.ToLower(cs.ClusterHeader)
	default:
		return nil, fmt.Errorf("route %q: cluster specifier %T is not supported by envoysim", r.name, cs)
	}
	if act.GetClusterNotFoundResponseCode() == routev3.RouteAction_NOT_FOUND {
		r.notFoundCode = 404
	} else if act.GetClusterNotFoundResponseCode() == routev3.RouteAction_INTERNAL_SERVER_ERROR {
		r.notFoundCode = 500
	}
	if act.GetTimeout() != nil {
		r.timeout = act.GetTimeout().AsDuration()
	}
	if act.GetRetryPolicy() != nil {
		// The route's policy replaces the virtual host's.
		rp, err := compileRetryPolicy(act.GetRetryPolicy())
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", r.name, err)
		}
		r.retry = rp
	}
	if irp := act.GetInternalRedirectPolicy(); irp != nil {
		rp := &redirectPolicy{codes: map[int]bool{}, maxRedirects: 1, allowCrossScheme: irp.GetAllowCrossSchemeRedirect()}
		if irp.GetMaxInternalRedirects() != nil {
			rp.maxRedirects = int(irp.GetMaxInternalRedirects().GetValue())
		}
		codes := irp.GetRedirectResponseCodes()
		if len(codes) == 0 {
			codes = []uint32{302}
		}
		for _, c := range codes {
			// "Only 301, 302, 303, 307 and 308 are valid values. Any other codes will be ignored."
			if slices.Contains([]uint32{301, 302, 303, 307, 308}, c) {
				rp.codes[int(c)] = true
			}
		}
		for _, h := range irp.GetResponseHeadersToCopy() {
			h = strings.ToLower(h)
			if strings.HasPrefix(h, ":") || h == "host" {
				return nil, fmt.Errorf("route %q: response_headers_to_copy cannot contain %q", r.name, h)
			}
			rp.copyResponseHeader = append(rp.copyResponseHeader, h)
		}
		r.redirect = rp
	}
	return r, nil
}

// finalizeResponseHeaders imitates RouteEntryImplBase::finalizeResponseHeaders
// (source/common/router/config_impl.cc) for the one level envoysim supports: the route's
// response_headers_to_remove, removed by full name (HeaderParser::evaluateHeaders removes
// before it adds). Envoy calls it on an upstream response after the upstream filters and
// the internal-redirect check (router.cc Filter::onUpstreamHeaders) and on every local
// reply of a stream with a route, before the reply's own headers are added
// (filter_manager.cc DownstreamFilterManager::sendLocalReplyViaFilterChain).
func (r *route) finalizeResponseHeaders(h *stream.Headers) {
	if r == nil {
		return
	}
	for _, name := range r.removeResponse {
		h.Del(name)
	}
}

// selectVirtualHost imitates RouteMatcher::findVirtualHost: exact domain, then the
// longest suffix wildcard, then the longest prefix wildcard, then "*".
func (rt *routeTable) selectVirtualHost(authority string) *virtualHost {
	a := strings.ToLower(authority)
	for _, vh := range rt.vhosts {
		if vh.exact[a] {
			return vh
		}
	}
	var best *virtualHost
	bestLen := -1
	for _, vh := range rt.vhosts {
		for _, s := range vh.suffixes {
			if strings.HasSuffix(a, s) && len(a) > len(s) && len(s) > bestLen {
				best, bestLen = vh, len(s)
			}
		}
	}
	if best != nil {
		return best
	}
	for _, vh := range rt.vhosts {
		for _, p := range vh.prefixes {
			if strings.HasPrefix(a, p) && len(a) > len(p) && len(p) > bestLen {
				best, bestLen = vh, len(p)
			}
		}
	}
	if best != nil {
		return best
	}
	for _, vh := range rt.vhosts {
		if vh.any {
			return vh
		}
	}
	return nil
}

// resolve matches headers against the table. nil means no route (404 NR).
func (rt *routeTable) resolve(h *stream.Headers) *resolvedRoute {
	if rt == nil {
		return nil
	}
	vh := rt.selectVirtualHost(h.Value(":authority"))
	if vh == nil {
		return nil
	}
	path := h.Value(":path")
	pathOnly := path
	if i := strings.IndexAny(pathOnly, "?#"); i >= 0 {
		pathOnly = pathOnly[:i]
	}
	for _, r := range vh.routes {
		if !r.matches(path, pathOnly, h) {
			continue
		}
		rr := &resolvedRoute{route: r, cluster: r.cluster}
		if r.clusterHeader != "" {
			rr.cluster = h.Value(r.clusterHeader) // first value only
		}
		return rr
	}
	return nil
}

// matches imitates PrefixRouteEntryImpl (whole :path), PathRouteEntryImpl and
// RegexRouteEntryImpl (path without query) plus the route's header matchers.
func (r *route) matches(path, pathOnly string, h *stream.Headers) bool {
	switch {
	case r.prefix != nil:
		if r.caseSensitive {
			if !strings.HasPrefix(path, *r.prefix) {
				return false
			}
		} else if !strings.HasPrefix(strings.ToLower(path), strings.ToLower(*r.prefix)) {
			return false
		}
	case r.path != nil:
		if r.caseSensitive {
			if pathOnly != *r.path {
				return false
			}
		} else if !strings.EqualFold(pathOnly, *r.path) {
			return false
		}
	case r.regex != nil:
		if !r.regex.MatchString(pathOnly) {
			return false
		}
	}
	for _, hm := range r.headers {
		if !hm.Matches(h) {
			return false
		}
	}
	return true
}
