package extproc

import (
	"strings"

	statev1 "github.com/switchyard-gw/switchyard/proto/switchyard/state/v1"
)

// The client's original headers in the state: the redirected request is built from the
// headers as shipped to the previous upstream (docs/design.md, "Attempt state"), after the attempt
// role's rewrites and the route role's removals, so the route role puts these back on
// re-entry. Absent and empty differ: a header the client did not send is removed again.

// saveHeader records the client's value of header name once; later calls for the same name
// keep the first (the client's) value. present is false when the client did not send it.
func saveHeader(st *statev1.State, name string, value []byte, present bool) {
	name = strings.ToLower(name)
	for _, h := range st.GetClientHeaders() {
		if h.GetName() == name {
			return
		}
	}
	h := &statev1.Header{Name: name}
	if present {
		// Non-nil even when empty: that is the field's presence.
		h.Value = append(make([]byte, 0, len(value)), value...)
	}
	st.ClientHeaders = append(st.ClientHeaders, h)
}

// savedHeader returns the client's value of header name: saved reports whether the state
// holds it at all, present whether the client sent it.
func savedHeader(st *statev1.State, name string) (value []byte, present, saved bool) {
	name = strings.ToLower(name)
	for _, h := range st.GetClientHeaders() {
		if h.GetName() == name {
			return h.GetValue(), h.Value != nil, true
		}
	}
	return nil, false, false
}
