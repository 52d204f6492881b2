package stream

import (
	"strings"
	"sync"
)

// Header is one header entry. Keys are always lower case.
type Header struct {
	Key   string
	Value string
}

// Headers is an ordered multimap of lower-cased header names, pseudo-headers first,
// like Envoy's HeaderMapImpl (envoy/source/common/http/header_map_impl.cc keeps
// insertion order and pseudo-headers before regular headers).
//
// One *Headers is shared by every filter of a stream, exactly as Envoy passes one
// RequestHeaderMap through the chain and the router keeps a pointer to it
// (downstream_headers_ in source/common/router/router.cc). Filters run in different
// goroutines, so every method locks.
type Headers struct {
	mu      sync.Mutex
	entries []Header
	// maxCount and maxBytes are the limits the codec gave the map
	// (HeaderMap::maxHeadersCount / maxHeadersKb); 0 = Envoy's defaults.
	maxCount, maxBytes int
}

// Envoy's default header map limits: DEFAULT_MAX_HEADERS_COUNT and
// DEFAULT_MAX_REQUEST_HEADERS_KB (source/common/http/header_map_impl.h, codes).
const (
	DefaultMaxHeadersCount = 100
	DefaultMaxHeadersBytes = 60 * 1024
)

// SetLimits records the codec's limits for this map (the HCM's max_headers_count and
// max_request_headers_kb for request headers).
func (h *Headers) SetLimits(maxCount, maxBytes int) {
	h.mu.Lock()
	h.maxCount, h.maxBytes = maxCount, maxBytes
	h.mu.Unlock()
}

// Limits returns the map's header count and byte limits.
func (h *Headers) Limits() (maxCount, maxBytes int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	maxCount, maxBytes = h.maxCount, h.maxBytes
	if maxCount == 0 {
		maxCount = DefaultMaxHeadersCount
	}
	if maxBytes == 0 {
		maxBytes = DefaultMaxHeadersBytes
	}
	return maxCount, maxBytes
}

// NewHeaders builds a map from key/value pairs (keys are lower-cased).
func NewHeaders(kv ...string) *Headers {
	h := &Headers{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func isPseudo(k string) bool { return strings.HasPrefix(k, ":") }

// Get returns the first value of key.
func (h *Headers) Get(key string) (string, bool) {
	key = strings.ToLower(key)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.entries {
		if e.Key == key {
			return e.Value, true
		}
	}
	return "", false
}

// Value returns the first value of key or "".
func (h *Headers) Value(key string) string {
	v, _ := h.Get(key)
	return v
}

// Has reports whether key is present.
func (h *Headers) Has(key string) bool {
	_, ok := h.Get(key)
	return ok
}

// Values returns every value of key, in order.
func (h *Headers) Values(key string) []string {
	key = strings.ToLower(key)
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.entries {
		if e.Key == key {
			out = append(out, e.Value)
		}
	}
	return out
}

// insertIndexLocked keeps pseudo-headers ahead of regular headers.
func (h *Headers) insertIndexLocked(key string) int {
	if !isPseudo(key) {
		return len(h.entries)
	}
	for i, e := range h.entries {
		if !isPseudo(e.Key) {
			return i
		}
	}
	return len(h.entries)
}

// Add appends a value (Envoy addCopy).
func (h *Headers) Add(key, value string) {
	key = strings.ToLower(key)
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.insertIndexLocked(key)
	h.entries = append(h.entries, Header{})
	copy(h.entries[i+1:], h.entries[i:])
	h.entries[i] = Header{Key: key, Value: value}
}

// Set replaces every value of key with one value, keeping the position of the first
// occurrence (Envoy setCopy), or appends it when absent.
func (h *Headers) Set(key, value string) {
	key = strings.ToLower(key)
	h.mu.Lock()
	found := false
	out := h.entries[:0]
	for _, e := range h.entries {
		if e.Key == key {
			if found {
				continue
			}
			found = true
			e.Value = value
		}
		out = append(out, e)
	}
	h.entries = out
	h.mu.Unlock()
	if !found {
		h.Add(key, value)
	}
}

// Del removes every value of key.
func (h *Headers) Del(key string) {
	key = strings.ToLower(key)
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.entries[:0]
	for _, e := range h.entries {
		if e.Key != key {
			out = append(out, e)
		}
	}
	h.entries = out
}

// All returns a copy of the entries in order.
func (h *Headers) All() []Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Header(nil), h.entries...)
}

// Len is the number of entries.
func (h *Headers) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.entries)
}

// ByteSize is the sum of key and value lengths (Envoy HeaderMap::byteSize).
func (h *Headers) ByteSize() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, e := range h.entries {
		n += len(e.Key) + len(e.Value)
	}
	return n
}

// Clone returns an independent copy.
func (h *Headers) Clone() *Headers {
	c, b := h.Limits()
	return &Headers{entries: h.All(), maxCount: c, maxBytes: b}
}

// ReplaceWith makes h hold exactly the entries of src (used to restore a map in place,
// as router.cc does when an internal redirect fails).
func (h *Headers) ReplaceWith(src *Headers) {
	entries := src.All()
	h.mu.Lock()
	h.entries = entries
	h.mu.Unlock()
}

// String renders the map for logs.
func (h *Headers) String() string {
	var b strings.Builder
	for _, e := range h.All() {
		b.WriteString(e.Key)
		b.WriteString(": ")
		b.WriteString(e.Value)
		b.WriteString("\n")
	}
	return b.String()
}
