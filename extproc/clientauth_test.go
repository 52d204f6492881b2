package extproc

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/internal/testlog"
	"github.com/switchyard-gw/switchyard/routing"
)

// fakeVerifier knows keys and their allow-lists (nil: every model) and counts its calls.
type fakeVerifier struct {
	mu    sync.Mutex
	keys  map[string][]string
	err   error
	calls int
}

func (v *fakeVerifier) Verify(_ context.Context, key string) (bool, []string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls++
	if v.err != nil {
		return false, nil, v.err
	}
	models, ok := v.keys[key]
	if !ok {
		return false, nil, nil
	}
	return true, models, nil
}

func (v *fakeVerifier) called() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.calls
}

// keysRig is a rig whose route role checks keys with v; its logs go to the returned buffer.
func keysRig(t *testing.T, v KeyVerifier) (*rig, *testlog.Buffer) {
	t.Helper()
	r := newRig(t)
	r.srv.opts.ClientAuth = ClientAuth{Mode: ClientAuthKeys, Verifier: v}
	logs := &testlog.Buffer{}
	r.srv.log = slog.New(slog.NewJSONHandler(logs, nil))
	return r, logs
}

const anthropicJSON = `{"model":"gpt-4o","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`

func chatHeaders(cred ...string) []string {
	return append([]string{":method", "POST", ":path", "/v1/chat/completions", ":authority", "gw", ":scheme", "http",
		"x-request-id", "req-1"}, cred...)
}

func messagesHeaders(cred ...string) []string {
	return append([]string{":method", "POST", ":path", "/v1/messages", ":authority", "gw", ":scheme", "http",
		"x-request-id", "req-1", "anthropic-version", "2023-06-01"}, cred...)
}

func TestRouteRoleClientKeys(t *testing.T) {
	const good, other = "sy-good", "sy-other-model"
	for _, tc := range []struct {
		name     string
		mode     ClientAuthMode
		headers  []string
		body     string // "" for a request answered at its headers
		storeErr error
		status   int    // 0: an attempt is scheduled
		typ      string // OpenAI error.type or Anthropic error.type
		code     string // OpenAI error.code or Anthropic error.details.error_code
	}{
		{name: "openai without key", mode: ClientAuthKeys, headers: chatHeaders(), status: 401, typ: "authentication_error", code: CodeInvalidAPIKey},
		{name: "openai wrong key", mode: ClientAuthKeys, headers: chatHeaders("authorization", "Bearer sy-wrong"), body: chatJSON, status: 401, typ: "authentication_error", code: CodeInvalidAPIKey},
		{name: "openai basic auth is no key", mode: ClientAuthKeys, headers: chatHeaders("authorization", "Basic "+good), body: chatJSON, status: 401, typ: "authentication_error", code: CodeInvalidAPIKey},
		{name: "openai good key", mode: ClientAuthKeys, headers: chatHeaders("authorization", "Bearer "+good), body: chatJSON},
		{name: "bearer scheme in any case", mode: ClientAuthKeys, headers: chatHeaders("authorization", "bearer "+good), body: chatJSON},
		{name: "azure api-key", mode: ClientAuthKeys, headers: chatHeaders("api-key", good), body: chatJSON},
		{name: "openai key for another model", mode: ClientAuthKeys, headers: chatHeaders("authorization", "Bearer "+other), body: chatJSON, status: 403, typ: "permission_error", code: CodeModelNotAllowed},
		{name: "anthropic without key", mode: ClientAuthKeys, headers: messagesHeaders(), status: 401, typ: "authentication_error", code: CodeInvalidAPIKey},
		{name: "anthropic wrong key", mode: ClientAuthKeys, headers: messagesHeaders("x-api-key", "sy-wrong"), body: anthropicJSON, status: 401, typ: "authentication_error", code: CodeInvalidAPIKey},
		// Past the key check, the rig's OpenAI-only deployment refuses the Messages API.
		{name: "anthropic good key", mode: ClientAuthKeys, headers: messagesHeaders("x-api-key", good), body: anthropicJSON, status: 400, typ: "invalid_request_error", code: "capability_unsupported"},
		{name: "anthropic key for another model", mode: ClientAuthKeys, headers: messagesHeaders("x-api-key", other), body: anthropicJSON, status: 403, typ: "permission_error", code: CodeModelNotAllowed},
		{name: "store down fails closed", mode: ClientAuthKeys, headers: chatHeaders("authorization", "Bearer "+good), body: chatJSON, storeErr: errors.New("redis: connection refused"), status: 503, typ: "service_unavailable_error", code: CodeAuthUnavailable},
		{name: "models list without key", mode: ClientAuthKeys, headers: []string{":method", "GET", ":path", "/v1/models", "x-request-id", "r"}, status: 401, typ: "authentication_error", code: CodeInvalidAPIKey},
		{name: "models list with key", mode: ClientAuthKeys, headers: []string{":method", "GET", ":path", "/v1/models", "x-request-id", "r", "authorization", "Bearer " + other}, status: 200},
		{name: "model not allowed to this key", mode: ClientAuthKeys, headers: []string{":method", "GET", ":path", "/v1/models/gpt-4o", "x-request-id", "r", "authorization", "Bearer " + other}, status: 403, typ: "permission_error", code: CodeModelNotAllowed},
		{name: "envoy mode trusts Envoy", mode: ClientAuthEnvoy, headers: chatHeaders(), body: chatJSON},
		{name: "envoy mode lists models", mode: ClientAuthEnvoy, headers: []string{":method", "GET", ":path", "/v1/models", "x-request-id", "r"}, status: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &fakeVerifier{keys: map[string][]string{good: nil, other: {"claude"}}, err: tc.storeErr}
			r, logs := keysRig(t, v)
			r.srv.opts.ClientAuth.Mode = tc.mode
			fs := r.route(t)
			a := fs.answer(t, reqHeaders(tc.body == "" && tc.status != 401, tc.headers...))
			if a.GetImmediateResponse() == nil && tc.body != "" {
				a = fs.answer(t, reqBody(tc.body))
			}
			ir := a.GetImmediateResponse()
			if tc.status == 0 {
				if v, _ := set(a.GetRequestBody().GetResponse().GetHeaderMutation(), contract.HeaderCluster); v != "sy-dep-a" {
					t.Fatalf("answer %v, want an attempt on a", a)
				}
				return
			}
			if ir == nil || int(ir.GetStatus().GetCode()) != tc.status {
				t.Fatalf("answer %v, want local reply %d", a, tc.status)
			}
			if tc.status == 200 {
				return
			}
			b := ir.GetBody()
			typ, code := gjson.GetBytes(b, "error.type").String(), gjson.GetBytes(b, "error.code").String()
			if strings.HasPrefix(tc.headers[3], "/v1/messages") {
				code = gjson.GetBytes(b, "error.details.error_code").String()
				if gjson.GetBytes(b, "type").String() != "error" {
					t.Errorf("not Anthropic's error shape: %s", b)
				}
			}
			if typ != tc.typ || code != tc.code {
				t.Errorf("error %s, want type %s code %s", b, tc.typ, tc.code)
			}
			if tc.storeErr != nil && !strings.Contains(logs.String(), "client key check failed") {
				t.Errorf("no log line for the failed check:\n%s", logs)
			}
			for _, k := range []string{good, other, "sy-wrong"} {
				if strings.Contains(logs.String(), k) {
					t.Errorf("a client key reached the logs:\n%s", logs)
				}
			}
		})
	}
}

// TestRouteRoleReentrySkipsKeyCheck: a re-entry carries the previous attempt's provider key,
// not the client's; its sealed state proves the first pass was authorized, so the key is
// not checked again. A forged state opens nothing and the request is checked as new.
func TestRouteRoleReentrySkipsKeyCheck(t *testing.T) {
	v := &fakeVerifier{keys: map[string][]string{}}
	r, _ := keysRig(t, v)
	req := routing.Request{ID: "req-1", Model: "gpt-4o", Start: t0}
	st := attemptstate.New(&req, dialect.Chat, t0.Add(30*time.Minute))
	sealed, err := r.srv.sealer.Seal(st)
	if err != nil {
		t.Fatal(err)
	}
	fs := r.route(t)
	fs.answer(t, reqHeaders(false, chatHeaders("authorization", "Bearer sk-provider-a", contract.HeaderState, sealed)...))
	a := fs.answer(t, reqBody(chatJSON))
	if v, _ := set(a.GetRequestBody().GetResponse().GetHeaderMutation(), contract.HeaderCluster); v != "sy-dep-a" {
		t.Fatalf("re-entry answer %v, want an attempt", a)
	}
	if n := v.called(); n != 0 {
		t.Fatalf("verifier called %d times on a re-entry", n)
	}

	forged := []byte(sealed)
	forged[len(forged)/2] ^= 1
	fs = r.route(t)
	a = fs.answer(t, reqHeaders(false, chatHeaders("authorization", "Bearer sk-provider-a", contract.HeaderState, string(forged))...))
	if a.GetImmediateResponse() == nil {
		a = fs.answer(t, reqBody(chatJSON))
	}
	if ir := a.GetImmediateResponse(); ir == nil || ir.GetStatus().GetCode() != 401 {
		t.Fatalf("forged state: %v, want 401", a)
	}
}

// A server configured for keys without a verifier refuses rather than opening the gateway.
func TestRouteRoleKeysWithoutVerifierFailsClosed(t *testing.T) {
	r, _ := keysRig(t, nil)
	fs := r.route(t)
	fs.answer(t, reqHeaders(false, chatHeaders("authorization", "Bearer sy-any")...))
	a := fs.answer(t, reqBody(chatJSON))
	if ir := a.GetImmediateResponse(); ir == nil || ir.GetStatus().GetCode() != 503 {
		t.Fatalf("answer %v, want 503", a)
	}
}
