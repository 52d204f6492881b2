package failure

import "net/http"

// headerValue reads the first value of a response header. net/http keys a Header by the
// canonical form, but a Header built from Envoy's header map (HTTP/2 style, lower case) by
// plain assignment keys it in lower case, so both spellings are looked up; indexing the map
// directly also avoids canonicalising on every lookup.
func headerValue(h http.Header, canonical, lower string) string {
	if v := h[canonical]; len(v) > 0 {
		return v[0]
	}
	if v := h[lower]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// retryRequested reports x-should-retry: true, the header OpenAI and Anthropic send to
// override the SDKs' status-based retry decision (docs/wire-formats.md §5; seen on Anthropic 529s,
// §3.4). "false" is read by nobody: see classifyStatus.
func retryRequested(h http.Header) bool {
	return equalFold(headerValue(h, "X-Should-Retry", "x-should-retry"), "true")
}
