package attemptstate

import (
	"strings"

	statev1 "github.com/switchyard-gw/switchyard/proto/switchyard/state/v1"
)

// The client's original headers: the redirected request is built from the headers as
// shipped to the previous upstream (docs/design.md, "Attempt state"), after the attempt
// role's rewrites and the route role's removals, so the route role puts these back on
// re-entry. Absent and empty differ: a header the client did not send is removed again.

// SaveHeader records the client's value of header name once; later calls for the same name
// keep the first (the client's) value. present is false when the client did not send it.
func (st *State) SaveHeader(name string, value []byte, present bool) {
	name = strings.ToLower(name)
	for _, h := range st.m.ClientHeaders {
		if h.Name == name {
			return
		}
	}
	h := &statev1.Header{Name: name}
	if present {
		// Non-nil even when empty: that is the field's presence.
		h.Value = append(make([]byte, 0, len(value)), value...)
	}
	st.m.ClientHeaders = append(st.m.ClientHeaders, h)
}

// SavedHeader returns the client's value of header name: saved reports whether the state
// holds it at all, present whether the client sent it. The value is the state's: read it,
// do not change it.
func (st *State) SavedHeader(name string) (value []byte, present, saved bool) {
	name = strings.ToLower(name)
	for _, h := range st.m.ClientHeaders {
		if h.Name == name {
			return h.Value, h.Value != nil, true
		}
	}
	return nil, false, false
}

// OriginalURL is the client's URL, from the pseudo-headers saved on the first pass: the
// 307's Location, so the redirected request is the client's again.
func (st *State) OriginalURL() string {
	scheme, _, _ := st.SavedHeader(":scheme")
	authority, _, _ := st.SavedHeader(":authority")
	path, _, _ := st.SavedHeader(":path")
	s := string(scheme)
	if s == "" {
		s = "http"
	}
	return s + "://" + string(authority) + string(path)
}
