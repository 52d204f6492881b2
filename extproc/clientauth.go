package extproc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
)

// Client access: a gateway that holds provider keys must not be an open proxy. The route
// role either checks the client's API key itself (ClientAuthKeys) or trusts an
// authentication Envoy ran in front of it, jwt_authn or ext_authz (ClientAuthEnvoy).

// ClientAuthMode says who authenticates clients.
type ClientAuthMode string

const (
	// ClientAuthEnvoy trusts Envoy: a filter before the route role's ext_proc (jwt_authn,
	// ext_authz, RBAC) has authenticated the request; the route role checks nothing. It is
	// also the zero value's meaning, for embedders and tests: the binary makes operators
	// choose explicitly.
	ClientAuthEnvoy ClientAuthMode = "envoy"
	// ClientAuthKeys checks the client's key with the KeyVerifier on the first pass of every
	// logical request (and on model listings).
	ClientAuthKeys ClientAuthMode = "keys"
)

// KeyVerifier checks a client key; admin.Verifier implements it. ok false: unknown,
// malformed or revoked key (401); models: the key's allow-list of public models, empty for
// every model (a model outside it is a 403, and a fallback to it is skipped); err: the key
// could not be checked (503, fail closed).
type KeyVerifier interface {
	Verify(ctx context.Context, key string) (ok bool, models []string, err error)
}

// ClientAuth configures client access.
type ClientAuth struct {
	Mode     ClientAuthMode
	Verifier KeyVerifier // required with ClientAuthKeys
}

// ParseClientAuthMode reads a -client-auth value.
func ParseClientAuthMode(s string) (ClientAuthMode, error) {
	switch m := ClientAuthMode(s); m {
	case ClientAuthKeys, ClientAuthEnvoy:
		return m, nil
	}
	return "", fmt.Errorf("unknown client authentication %q (keys or envoy)", s)
}

// authErrorLogInterval is the least time between two log lines of failed key checks.
const authErrorLogInterval = 10 * time.Second

// Codes of the client-access answers.
const (
	CodeInvalidAPIKey   = "invalid_api_key"
	CodeModelNotAllowed = "model_not_allowed"
	CodeAuthUnavailable = "auth_unavailable"
)

// clientKey is the key the client presented, in the header its dialect uses first:
// Anthropic's SDKs send x-api-key, OpenAI's authorization: Bearer, Azure OpenAI's api-key.
// Each dialect's SDKs can send the others' too (anthropic-sdk-go WithAuthToken sends a
// bearer), so every one is looked at. present is false when none was sent.
func clientKey(h headerMap, f dialect.Family) (key string, present bool) {
	order := [...]string{"authorization", "api-key", "x-api-key"}
	if f == dialect.Anthropic {
		order = [...]string{"x-api-key", "authorization", "api-key"}
	}
	for _, name := range order {
		v, ok := h.get(name)
		if !ok {
			continue
		}
		if name == "authorization" {
			// The scheme is case-insensitive (RFC 9110 §11.1); anything but a bearer is
			// not a key.
			scheme, token, _ := strings.Cut(v, " ")
			if !strings.EqualFold(scheme, "bearer") {
				return "", true
			}
			v = token
		}
		return strings.TrimSpace(v), true
	}
	return "", false
}

// needsKey reports whether this pass must present a client key: with ClientAuthKeys, every
// first pass. A re-entry is proved a continuation by its state, which only switchyard can
// seal (AES-256-GCM under the state keys, bound to the request id, with a deadline) and only
// seals after a first pass that passed this check; a forged, replayed onto another request
// or expired state does not open (openState) and the request is checked as new.
func (p *routeProcessor) needsKey() bool {
	return p.s.opts.ClientAuth.Mode == ClientAuthKeys && !p.reentry
}

// missingKey is the early 401 at the request headers, before a body is buffered: with
// ClientAuthKeys a first pass without any key cannot succeed.
func (p *routeProcessor) missingKey() *dialect.Error {
	if !p.needsKey() {
		return nil
	}
	if key, _ := clientKey(p.headers, p.route.Family); key == "" {
		p.authRejected("missing", "")
		return unauthorized(p.route.Family, "Missing API key: send it as `Authorization: Bearer <key>` or `x-api-key`.")
	}
	return nil
}

// authorize checks the client's key for model ("" for the model listing, where any valid
// key will do); a nil error means go on, and models is the key's allow-list (nil: every
// model). Never logs the key.
func (p *routeProcessor) authorize(ctx context.Context, model string) (models []string, _ *dialect.Error) {
	if !p.needsKey() {
		return nil, nil
	}
	key, _ := clientKey(p.headers, p.route.Family)
	if key == "" {
		p.authRejected("missing", model)
		return nil, unauthorized(p.route.Family, "Missing API key: send it as `Authorization: Bearer <key>` or `x-api-key`.")
	}
	ok, err := false, errNoVerifier
	if v := p.s.opts.ClientAuth.Verifier; v != nil {
		ok, models, err = v.Verify(ctx, key)
	}
	allowed := len(models) == 0 || slices.Contains(models, model)
	switch {
	case err != nil:
		// Fail closed: a gateway that cannot check keys must not become an open proxy. The
		// log says so once per authErrorLogInterval with the number refused meanwhile (an
		// outage would otherwise write a line per request); the metric counts each.
		if ok, held := p.s.authLog.allow(p.s.clock.Now(), authErrorLogInterval); ok {
			p.s.log.Error("client key check failed; request refused (503 auth_unavailable)", "request", p.requestID,
				"model", model, "err", err, "refused_since_last_line", held, "interval", authErrorLogInterval)
		}
		p.s.metric.clientRejected("unavailable")
		return nil, &dialect.Error{Family: p.route.Family, Status: http.StatusServiceUnavailable, Code: CodeAuthUnavailable,
			Message: "The gateway could not check the API key; try again later."}
	case !ok:
		p.authRejected("invalid", model)
		return nil, unauthorized(p.route.Family, "Incorrect API key provided.")
	case !allowed && model != "":
		p.authRejected("model_not_allowed", model)
		return nil, &dialect.Error{Family: p.route.Family, Status: http.StatusForbidden, Code: CodeModelNotAllowed, Param: "model",
			Message: "This API key may not use the model `" + model + "`."}
	}
	return models, nil
}

func (p *routeProcessor) authRejected(reason, model string) {
	p.s.log.Info("client key rejected", "request", p.requestID, "reason", reason, "model", model)
	p.s.metric.clientRejected(reason)
}

func unauthorized(f dialect.Family, msg string) *dialect.Error {
	return &dialect.Error{Family: f, Status: http.StatusUnauthorized, Code: CodeInvalidAPIKey, Message: msg}
}

// errNoVerifier fails closed a ClientAuthKeys server built without a verifier.
var errNoVerifier = errors.New("extproc: ClientAuthKeys without a Verifier")
