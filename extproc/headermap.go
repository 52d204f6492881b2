package extproc

import (
	"iter"
	"net/http"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/switchyard-gw/switchyard/extproc/provider"
	"github.com/switchyard-gw/switchyard/internal/contract"
)

// Headers switchyard itself reads or writes.
const (
	// HeaderRoutingMetadata asks for the unified_routing object (behaviour §10.1).
	HeaderRoutingMetadata = "x-unified-routing-metadata"
	// HeaderTransport tells the trampoline what the attempt role of the trampoline attempt
	// knows about the transport failure.
	HeaderTransport = "x-switchyard-transport"

	headerRequestID      = "x-request-id"
	headerTimeout        = "x-envoy-upstream-rq-timeout-ms"
	headerPerTryTimeout  = "x-envoy-upstream-rq-per-try-timeout-ms"
	switchyardPrefix     = "x-switchyard-"
	envoyPrefix          = "x-envoy-"
	attributesFilterName = "envoy.filters.http.ext_proc"
)

// savedHeaders are the client headers whose original values the state keeps, because an
// attempt role overwrites or removes them and Envoy builds the redirected request from the
// headers as shipped to the provider (router.cc convertRequestHeadersForInternalRedirect).
var savedHeaders = [...]string{"authorization", "api-key", "x-api-key", "anthropic-version", "anthropic-beta", "content-length",
	"openai-organization", "openai-project", HeaderRoutingMetadata}

// headerMap is a read view of the headers Envoy sent: lower-case names, raw values.
type headerMap struct{ h *corev3.HeaderMap }

// get returns the first value of name.
func (m headerMap) get(name string) (string, bool) {
	hv := m.find(name)
	if hv == nil {
		return "", false
	}
	if raw := hv.GetRawValue(); raw != nil {
		return string(raw), true
	}
	return hv.GetValue(), true
}

// raw returns the first value of name as Envoy sent it, without a copy when it came as
// raw_value (as Envoy sends it): read it, never keep it.
func (m headerMap) raw(name string) ([]byte, bool) {
	hv := m.find(name)
	if hv == nil {
		return nil, false
	}
	if raw := hv.GetRawValue(); raw != nil {
		return raw, true
	}
	return []byte(hv.GetValue()), true
}

func (m headerMap) find(name string) *corev3.HeaderValue {
	for _, hv := range m.h.GetHeaders() {
		if hv.GetKey() == name {
			return hv
		}
	}
	return nil
}

func (m headerMap) value(name string) string {
	v, _ := m.get(name)
	return v
}

// each calls f for every header.
func (m headerMap) each(f func(name, value string)) {
	if m.h == nil {
		return
	}
	for _, hv := range m.h.GetHeaders() {
		v := hv.GetValue()
		if raw := hv.GetRawValue(); raw != nil {
			v = string(raw)
		}
		f(hv.GetKey(), v)
	}
}

// names yields the header names.
func (m headerMap) names() iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, hv := range m.h.GetHeaders() {
			if !yield(hv.GetKey()) {
				return
			}
		}
	}
}

// httpHeader converts the regular (non-pseudo) headers for code that reads net/http headers
// (the failure classifier reads Retry-After and friends).
func (m headerMap) httpHeader() http.Header {
	h := http.Header{}
	m.each(func(name, value string) {
		if !strings.HasPrefix(name, ":") {
			h.Add(name, value)
		}
	})
	return h
}

// metadataString reads namespace/key from a metadata context.
func metadataString(md *corev3.Metadata, key string) string {
	ns := md.GetFilterMetadata()[contract.MetadataNamespace]
	if ns == nil {
		return ""
	}
	return ns.GetFields()[key].GetStringValue()
}

func metadataBool(md *corev3.Metadata, key string) bool {
	ns := md.GetFilterMetadata()[contract.MetadataNamespace]
	if ns == nil {
		return false
	}
	return ns.GetFields()[key].GetBoolValue()
}

// attribute reads one request attribute Envoy evaluated for the filter.
func attribute(attrs map[string]*structpb.Struct, name string) *structpb.Value {
	return attrs[attributesFilterName].GetFields()[name]
}

// truthy reads a boolean attribute: Envoy passes a CEL bool as a bool and prints anything
// else (ExpressionManager::evaluateAttributes).
func truthy(v *structpb.Value) bool { return v.GetBoolValue() || v.GetStringValue() == "true" }

// passState is the sealed state of this pass on an attempt stream's first message: the
// request attribute the published attempt filter asks for (contract.AttributeState), or the
// forwarded namespace of a configuration written before it.
func passState(m *extprocv3.ProcessingRequest) string {
	if s := attribute(m.GetAttributes(), contract.AttributeState).GetStringValue(); s != "" {
		return s
	}
	return metadataString(m.GetMetadataContext(), metaState)
}

// requestSent reports whether this pass's provider attempt released its request
// (contract.AttributeSent, or the forwarded namespace).
func requestSent(m *extprocv3.ProcessingRequest) bool {
	return truthy(attribute(m.GetAttributes(), contract.AttributeSent)) || metadataBool(m.GetMetadataContext(), metaSent)
}

// stripped is the mutation that removes the client's credentials and every header starting
// with one of prefixes from h: the one place a role takes them off a request.
func stripped(h headerMap, prefixes ...string) mutation {
	var m mutation
	for name := range provider.ClientCredentialHeaders() {
		if _, ok := h.raw(name); ok {
			m.removeHeader(name)
		}
	}
	for name := range h.names() {
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				m.removeHeader(name)
				break
			}
		}
	}
	return m
}
