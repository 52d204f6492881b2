package provider

import (
	"fmt"
	"iter"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/routing/failure"
)

// Client-only request headers.
const (
	// HeaderPrefix is switchyard's own header namespace (x-switchyard-state,
	// x-switchyard-cluster, …): never for a provider.
	HeaderPrefix = "x-switchyard-"
	// HeaderUnifiedRouting asks for the unified_routing response object (behaviour §10.1).
	HeaderUnifiedRouting = "x-unified-routing-metadata"
)

// Input is what a rewrite needs of the client's request.
type Input struct {
	Dialect dialect.Dialect
	// Stream is the request's stream flag (dialect.Request.Stream).
	Stream bool
	// IncludeUsage asks that an OpenAI Chat stream carry its usage chunk
	// (stream_options.include_usage=true), so that the gateway counts the tokens.
	IncludeUsage bool
	// Body is the client's body (the router replays it unchanged on every attempt).
	Body []byte
	// HeaderNames yields the request's header names, lower case, as Envoy presents them;
	// nil yields none. It finds the x-switchyard-* headers to remove.
	HeaderNames iter.Seq[string]
	// AnthropicVersion is the client's anthropic-version header, "" if none: kept for an
	// Anthropic provider, else AnthropicVersion is sent.
	AnthropicVersion string
}

// Rewrite is the request as the provider must see it. Header names are lower case; Set
// and Remove never share a name, so the order Envoy applies them in does not matter.
type Rewrite struct {
	Scheme, Authority, Path string
	Set                     []dialect.Header
	Remove                  []string
	// Body is the rewritten body, nil when the client's body goes unchanged.
	Body []byte
	// ContentLength is the length of the body sent (Body, or the client's). When Body is
	// set, Set carries it as content-length: in BUFFERED mode Envoy applies the body
	// response's header mutation first and then rejects a body whose length differs from a
	// kept content-length (ProcessorState::handleBufferedBodyCallback, as envoysim's
	// handleBufferedBody imitates it).
	ContentLength int
}

// Rewrite rewrites in for up: the path for in.Dialect (ErrDialect when up does not speak
// it), the authority and scheme of the base URL, the provider's credentials, the client's
// credentials and switchyard's headers removed, and the body's model set to the provider's
// model (and stream usage asked for, see Input.IncludeUsage).
func (up *Upstream) Rewrite(in Input) (Rewrite, error) {
	path, err := up.Path(in.Dialect)
	if err != nil {
		return Rewrite{}, err
	}
	rw := Rewrite{Scheme: up.Scheme, Authority: up.Authority, Path: path, Set: make([]dialect.Header, 0, 3)}
	if up.credName != "" {
		rw.Set = append(rw.Set, dialect.Header{Name: up.credName, Value: up.credValue})
	}
	if up.Provider == failure.ProviderAnthropic {
		v := in.AnthropicVersion
		if v == "" {
			v = AnthropicVersion
		}
		rw.Set = append(rw.Set, dialect.Header{Name: "anthropic-version", Value: v})
	}
	rw.Remove = up.remove
	if in.HeaderNames != nil {
		for name := range in.HeaderNames {
			if strings.HasPrefix(name, HeaderPrefix) {
				if len(rw.Remove) == len(up.remove) { // copy before the first append: up.remove is shared
					rw.Remove = append(make([]string, 0, len(up.remove)+2), up.remove...)
				}
				rw.Remove = append(rw.Remove, name)
			}
		}
	}
	body, err := up.body(in)
	if err != nil {
		return Rewrite{}, err
	}
	rw.ContentLength = len(in.Body)
	if body != nil {
		rw.Body, rw.ContentLength = body, len(body)
		rw.Set = append(rw.Set, dialect.Header{Name: "content-length", Value: strconv.Itoa(len(body))})
	}
	return rw, nil
}

// body returns the rewritten body, or nil when the client's body is right as it is. The
// model is always the provider's (Azure routes by the deployment in the path and ignores
// it, wire-formats §4.1, but its /openai/responses and v1 routes take the deployment from
// it).
func (up *Upstream) body(in Input) ([]byte, error) {
	var out []byte
	// gjson.GetBytes copies what it finds; a view of the body does not (nothing read here
	// outlives the call).
	client := unsafe.String(unsafe.SliceData(in.Body), len(in.Body))
	if gjson.Get(client, "model").Str != up.model {
		b, err := sjson.SetBytes(in.Body, "model", up.model)
		if err != nil {
			return nil, fmt.Errorf("rewriting model: %w", err)
		}
		out = b
	}
	if in.IncludeUsage && in.Stream && in.Dialect == dialect.Chat && up.acceptsStreamUsage() &&
		!dialect.StreamUsageAsked(in.Body) {
		src := out
		if src == nil {
			src = in.Body
		}
		// In place only on a buffer of our own: the client's body is replayed on redirects.
		b, err := sjson.SetBytesOptions(src, "stream_options.include_usage", true, &sjson.Options{ReplaceInPlace: out != nil})
		if err != nil {
			return nil, fmt.Errorf("setting stream_options.include_usage: %w", err)
		}
		out = b
	}
	return out, nil
}

// acceptsStreamUsage reports whether the provider takes stream_options.include_usage.
func (up *Upstream) acceptsStreamUsage() bool {
	switch up.Provider {
	case failure.ProviderAzureOpenAI:
		return up.azureUsage
	case failure.ProviderAnthropic:
		return false
	}
	return true
}
