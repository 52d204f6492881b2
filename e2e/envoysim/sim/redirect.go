package sim

import (
	"net/url"
	"strings"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// setupRedirect imitates Filter::setupRedirect and the "Internal redirects" section
// of docs/root/intro/arch_overview/http/http_connection_management.rst
// (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/http/http_connection_management#internal-redirects):
// the request must be complete and its body buffered within the buffer limit, the
// location absolute, the scheme unchanged unless allowed, and the redirect count
// below max_internal_redirects. On success the stream is recreated through the whole
// filter chain; on failure the 3xx goes downstream like any response.
func (r *router) setupRedirect(resp *stream.Headers, code int) bool {
	loc, hasLoc := resp.Get("location")
	// The docs' rule "the request must be smaller than the buffer limit" is applied
	// as written. (router.cc tests `!request_buffer_overflowed_ ||
	// !callbacks_->decodingBuffer()`, which would also follow a redirect, without its
	// body, when the very first body chunk overflowed; envoysim does not reproduce that.)
	if !r.downstreamEnd || r.overflowed || !hasLoc {
		return false
	}
	if !r.convertRequestHeadersForInternalRedirect(resp, loc, code) {
		return false
	}
	body := r.body
	if r.cur != nil {
		r.cur.reset()
		r.cur = nil
	}
	r.globalTimer.stop()
	r.perTryTimer.stop()
	r.retryTimer.stop()
	r.done = true
	r.st.setDetails("internal_redirect")
	// ActiveStream::recreateStream: the headers map (as shipped upstream, now
	// rewritten) and the buffered body go to a new stream.
	r.st.redirectCh <- &redirect{headers: r.headers, body: body}
	return true
}

// convertRequestHeadersForInternalRedirect imitates the function of that name in
// router.cc: copy response_headers_to_copy, replace :scheme/:authority/:path from the
// Location, re-resolve the route, set x-envoy-original-url. The headers are restored
// if the redirect cannot be done.
func (r *router) convertRequestHeadersForInternalRedirect(resp *stream.Headers, location string, code int) bool {
	h := r.headers
	if !h.Has(":path") || location == "" {
		return false
	}
	u, err := url.Parse(location)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false // not a valid absolute URL (Http::Utility::Url::initialize)
	}
	policy := r.rr.route.redirect
	// Listeners are plaintext, so the downstream scheme is http
	// (schemeIsHttp: the :scheme header or a connection without TLS).
	schemeIsHTTP := true
	targetIsHTTP := u.Scheme == "http"
	if !policy.allowCrossScheme && schemeIsHTTP != targetIsHTTP {
		return false
	}
	if r.st.req.numInternalRedirects >= policy.maxRedirects {
		return false
	}
	saved := h.Clone()
	for _, name := range policy.copyResponseHeader {
		vals := resp.Values(name)
		h.Del(name)
		for _, v := range vals {
			h.Add(name, v)
		}
	}
	h.Set(":scheme", u.Scheme)
	h.Set(":authority", u.Host)
	h.Set(":path", pathAndQuery(location))
	r.st.clearRouteCache()
	if r.st.route() == nil {
		h.ReplaceWith(saved)
		return false
	}
	// RFC 7231 6.4.4: a 303 turns anything but GET/HEAD into a body-less GET.
	if code == 303 {
		if m := h.Value(":method"); m != "GET" && m != "HEAD" {
			h.Set(":method", "GET")
			h.Del("content-length")
			r.body = nil
		}
	}
	r.st.req.numInternalRedirects++
	scheme := "https"
	if schemeIsHTTP {
		scheme = "http"
	}
	h.Set("x-envoy-original-url", scheme+"://"+saved.Value(":authority")+saved.Value(":path"))
	return true
}

// pathAndQuery is Url::pathAndQueryParams without the #fragment
// (http_reject_path_with_fragment strips it).
func pathAndQuery(location string) string {
	rest := location
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	i := strings.IndexAny(rest, "/?")
	if i < 0 {
		return "/"
	}
	p := rest[i:]
	if j := strings.IndexByte(p, '#'); j >= 0 {
		p = p[:j]
	}
	if strings.HasPrefix(p, "?") {
		p = "/" + p
	}
	return p
}
