package sim

import (
	"net/http"
	"slices"
	"strings"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// requestTrailers turns the trailers Go's server read after the body into a trailer
// map (lower-case keys, sorted); nil when no declared trailer got a value.
func requestTrailers(t http.Header) *stream.Headers {
	keys := make([]string, 0, len(t))
	for k, vs := range t {
		if len(vs) > 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	h := stream.NewHeaders()
	for _, k := range keys {
		for _, v := range t[k] {
			h.Add(strings.ToLower(k), v)
		}
	}
	return h
}

// restoreTrailerHeader puts back the `trailer` request header, which Go's server
// consumes to declare r.Trailer; Envoy forwards it like any other header.
func restoreTrailerHeader(h *stream.Headers, r *http.Request) {
	if len(r.Trailer) == 0 || h.Has("trailer") {
		return
	}
	keys := make([]string, 0, len(r.Trailer))
	for k := range r.Trailer {
		keys = append(keys, strings.ToLower(k))
	}
	slices.Sort(keys)
	h.Set("trailer", strings.Join(keys, ", "))
}

// declaredTrailers returns the trailer names a `trailer` header declares, for Go's
// client (which sends only trailers it knows of in advance in its own `trailer`
// header, yet sends every key of req.Trailer at the end).
func declaredTrailers(h *stream.Headers) http.Header {
	t := http.Header{}
	for _, v := range h.Values("trailer") {
		for _, k := range strings.Split(v, ",") {
			if k = strings.TrimSpace(k); k != "" {
				t[http.CanonicalHeaderKey(k)] = nil
			}
		}
	}
	return t
}
