package admin

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// APIOptions configure the admin API (behaviour §11), served on its own listener.
type APIOptions struct {
	// MasterKey guards every endpoint (Authorization: Bearer <key>, constant-time compare).
	// Empty: every request answers 401, never open access.
	MasterKey string
	// Config is the store the configuration is read from and written to. Required.
	Config store.ConfigStore
	// Validator checks every resulting configuration before it is stored. Required.
	Validator *config.Validator
	// ClientKeys stores the client API keys; nil leaves /admin/client-keys unrouted.
	ClientKeys store.ClientKeys
	// Router serves GET /v1/models and the status view GET /v1/models/{model}/deployments
	// (behaviour §10.3) from the configuration in force; nil leaves them unrouted.
	Router *routing.Router
	// Gate refuses configuration writes while the store is behind the configuration in force
	// (config.Guard); nil refuses none.
	Gate WriteGate
	// Omitted reports the deployments the xDS server left out of the snapshot in force (id:
	// why), marked in the status view; nil: none.
	Omitted func() map[string]string
	// Rand is the source of client keys (crypto/rand when nil).
	Rand io.Reader
	// Now stamps client keys (time.Now when nil).
	Now    func() time.Time
	Logger *slog.Logger
}

// api is the admin API's state.
type api struct {
	cs    store.ConfigStore
	v     *config.Validator
	keys  store.ClientKeys
	r     *routing.Router
	gate  WriteGate
	omit  func() map[string]string
	rand  io.Reader
	now   func() time.Time
	log   *slog.Logger
	retry int // read-modify-write attempts of a write without If-Match
}

// writeAttempts bounds the read-modify-write rounds of a write without If-Match. Each round
// some concurrent writer wins, so a writer racing k others loses at most k rounds; operator
// traffic is far below this.
const writeAttempts = 16

// NewAPI returns the admin API handler: configuration CRUD under /admin (behaviour §11), client
// keys, GET /v1/models and the status view, all behind the master key.
func NewAPI(opts APIOptions) (http.Handler, error) {
	if opts.Config == nil || opts.Validator == nil {
		return nil, errors.New("admin: NewAPI needs a configuration store and a validator")
	}
	a := &api{cs: opts.Config, v: opts.Validator, keys: opts.ClientKeys, r: opts.Router, gate: opts.Gate, omit: opts.Omitted,
		rand: opts.Rand, now: opts.Now, log: opts.Logger, retry: writeAttempts}
	if a.rand == nil {
		a.rand = rand.Reader
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	a.routeSettings(mux)
	a.routeDeployments(mux)
	a.routeChains(mux)
	a.routePolicies(mux)
	if a.keys != nil {
		a.routeClientKeys(mux)
	}
	if a.r != nil {
		mux.HandleFunc("GET /v1/models", a.listModels)
		mux.Handle("GET /v1/models/{model}/deployments", statusHandler(a.r, a.omit, a.log))
	}
	return requireMaster(opts.MasterKey, mux), nil
}

// apiError is an answer other than success, in the OpenAI error shape.
type apiError struct {
	status    int
	code, msg string
	fields    []config.FieldError
}

func (e *apiError) Error() string { return e.msg }

func notFound(what string) *apiError {
	return &apiError{status: http.StatusNotFound, code: "not_found", msg: what + " does not exist."}
}

func conflict(what string) *apiError {
	return &apiError{status: http.StatusConflict, code: "already_exists", msg: what + " already exists; PUT replaces it."}
}

func badField(field, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "invalid_configuration", msg: field + ": " + msg,
		fields: []config.FieldError{{Field: field, Message: msg}}}
}

// answer writes err: an *apiError as itself, a *config.ValidationError as 400 naming every
// field (behaviour §11.1), anything else as 503 (the store failed; logged, not shown).
func (a *api) answer(w http.ResponseWriter, req *http.Request, err error) {
	var ae *apiError
	var ve *config.ValidationError
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &ve):
		ae = &apiError{status: http.StatusBadRequest, code: "invalid_configuration", msg: ve.Error(), fields: ve.Errors}
	default:
		a.log.Error("admin request failed", "method", req.Method, "path", req.URL.Path, "err", err)
		ae = &apiError{status: http.StatusServiceUnavailable, code: "store_unavailable", msg: "The configuration store could not be reached."}
	}
	typ := "invalid_request_error"
	if ae.status >= 500 {
		typ = "api_error"
	}
	body := map[string]any{"message": ae.msg, "type": typ, "code": ae.code, "param": nil}
	if len(ae.fields) > 0 {
		body["param"] = ae.fields[0].Field
		fields := make([]map[string]string, len(ae.fields))
		for i, f := range ae.fields {
			fields[i] = map[string]string{"field": f.Field, "message": f.Message}
		}
		body["fields"] = fields
	}
	writeJSON(w, ae.status, map[string]any{"error": body})
}

// errPrecondition is a stale If-Match.
var errPrecondition = &apiError{status: http.StatusPreconditionFailed, code: "version_mismatch",
	msg: "The configuration changed since the version in If-Match; GET it again and retry."}

// etag renders a configuration version as an entity tag.
func etag(version uint64) string { return fmt.Sprintf("%q", fmt.Sprint(version)) }
