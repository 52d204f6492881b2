package admin

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// Every write is a read-modify-write of the whole configuration: load it with its version,
// apply the change to it, validate the whole result (the schema and the rules that span
// objects, behaviour §6.3, §11.1) and store it with ReplaceConfigIf on the version read, a
// compare-and-swap, so no write is ever lost or applied to a configuration it was not
// validated against. The version is the configuration's ETag: a write with If-Match on a
// version that is no longer current answers 412 and changes nothing; a write without
// If-Match applies to whatever is current, re-read and re-validated if another write got in
// between. Other replicas pick the new version up through the store's notification
// (config.Follower).

// edit is the answer of a successful change.
type edit struct {
	status int
	body   any // nil: no body
	// path is the changed object's JSON path in the configuration (`deployments[3]`):
	// validation errors inside it are reported with the request body's own field names.
	path string
}

// change applies one write to cfg, a private copy of the stored configuration. secrets are
// the stored deployment keys (read-only).
type change func(cfg *configv1.Config, secrets map[string]string) (edit, error)

// write runs a change; op names it in the log (never a body, which may hold a key).
func (a *api) write(w http.ResponseWriter, req *http.Request, op string, fn change) {
	match, conditional, err := ifMatch(req)
	if err != nil {
		a.answer(w, req, err)
		return
	}
	for attempt := 1; ; attempt++ {
		snap, err := a.cs.LoadConfig(req.Context())
		if err != nil {
			a.answer(w, req, err)
			return
		}
		if err := a.writable(snap.Version); err != nil {
			a.answer(w, req, err)
			return
		}
		if conditional && !match(snap.Version) {
			a.answer(w, req, errPrecondition)
			return
		}
		cfg := proto.CloneOf(snap.Config)
		e, err := fn(cfg, snap.Secrets)
		if err != nil {
			a.answer(w, req, err)
			return
		}
		// Stored, not Config: a deployment already stored that breaks the endpoint rules
		// must not block every other write (the new deployment itself passed Message).
		if err := a.v.Stored(cfg); err != nil {
			a.answer(w, req, relabel(err, e.path))
			return
		}
		v, err := a.cs.ReplaceConfigIf(req.Context(), snap.Version, cfg)
		if errors.Is(err, store.ErrVersionConflict) {
			if conditional {
				a.answer(w, req, errPrecondition)
				return
			}
			if attempt < a.retry {
				continue
			}
			a.answer(w, req, &apiError{status: http.StatusConflict, code: "concurrent_change",
				msg: "The configuration kept changing under this request; retry."})
			return
		}
		if err != nil {
			a.answer(w, req, err)
			return
		}
		a.log.Info("admin configuration change", "op", op, "version", v)
		w.Header().Set("ETag", etag(v))
		if e.body == nil {
			w.WriteHeader(e.status)
			return
		}
		writeJSON(w, e.status, e.body)
		return
	}
}

// read answers a GET with the configuration's version as ETag.
func (a *api) read(w http.ResponseWriter, req *http.Request, fn func(snap store.ConfigSnapshot) (any, error)) {
	snap, err := a.cs.LoadConfig(req.Context())
	if err != nil {
		a.answer(w, req, err)
		return
	}
	body, err := fn(snap)
	if err != nil {
		a.answer(w, req, err)
		return
	}
	w.Header().Set("ETag", etag(snap.Version))
	writeJSON(w, http.StatusOK, body)
}

// ifMatch parses If-Match (RFC 9110 §13.1.1): a list of entity tags or `*`. conditional is
// false without the header.
func ifMatch(req *http.Request) (match func(uint64) bool, conditional bool, err error) {
	values := req.Header.Values("If-Match")
	if len(values) == 0 {
		return nil, false, nil
	}
	var versions []uint64
	for _, v := range values {
		for tag := range strings.SplitSeq(v, ",") {
			tag = strings.TrimSpace(tag)
			if tag == "*" {
				return func(uint64) bool { return true }, true, nil
			}
			tag = strings.Trim(strings.TrimPrefix(tag, "W/"), `"`)
			n, err := strconv.ParseUint(tag, 10, 64)
			if err != nil {
				return nil, true, badField("If-Match", "not a configuration version (an ETag of this API)")
			}
			versions = append(versions, n)
		}
	}
	return func(cur uint64) bool {
		for _, v := range versions {
			if v == cur {
				return true
			}
		}
		return false
	}, true, nil
}

// relabel reports the errors inside the changed object (path) with the body's field names.
func relabel(err error, path string) error {
	var ve *config.ValidationError
	if path == "" || !errors.As(err, &ve) {
		return err
	}
	out := &config.ValidationError{Errors: make([]config.FieldError, len(ve.Errors))}
	for i, fe := range ve.Errors {
		if fe.Field == path {
			fe.Field = ""
		} else if rest, ok := strings.CutPrefix(fe.Field, path+"."); ok {
			fe.Field = rest
		}
		out.Errors[i] = fe
	}
	return out
}

// maxBody bounds a request body: a whole configuration is far smaller.
const maxBody = 1 << 20

// decode reads a JSON object into m with protojson (docs/behaviour.md's camelCase names; an unknown
// field is a 400 naming it, never silently ignored). `apiKeySet`, which GET adds, is dropped
// so a GET body can be edited and sent back. A non-string apiKey is refused without
// repeating its value, which protojson's message would.
func decode(req *http.Request, m proto.Message) error {
	b, err := io.ReadAll(http.MaxBytesReader(nil, req.Body, maxBody))
	if err != nil {
		return bodyError(err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
		return &apiError{status: http.StatusBadRequest, code: "invalid_body", msg: "request body: must be a JSON object"}
	}
	if raw, ok := obj["apiKey"]; ok {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return badField("apiKey", "must be a string")
		}
	}
	delete(obj, apiKeySetField)
	b, err = json.Marshal(obj)
	if err != nil {
		return &apiError{status: http.StatusBadRequest, code: "invalid_body", msg: "request body: " + err.Error()}
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(b, m); err != nil {
		msg := err.Error()
		// protojson: `proto: (line 1:2): unknown field "weigth"`; the position refers to the
		// re-encoded body, so only the field is kept.
		if _, after, ok := strings.Cut(msg, "): "); ok {
			msg = after
		}
		ae := &apiError{status: http.StatusBadRequest, code: "invalid_body", msg: msg}
		if name := protojsonField(msg); name != "" {
			ae.fields = []config.FieldError{{Field: name, Message: msg}}
		}
		return ae
	}
	return nil
}

// protojsonField is the field a protojson error names: `unknown field "weigth"`, or
// `invalid value for uint32 field weight: -1` (a wrong type or a negative number; the
// JSON name of the innermost field).
func protojsonField(msg string) string {
	if _, rest, ok := strings.Cut(msg, `field "`); ok {
		if name, _, ok := strings.Cut(rest, `"`); ok {
			return name
		}
	}
	if strings.HasPrefix(msg, "invalid value for ") {
		if _, rest, ok := strings.Cut(msg, " field "); ok {
			if name, _, ok := strings.Cut(rest, ":"); ok {
				return name
			}
		}
	}
	return ""
}

// bodyError answers a body that could not be read: 413 over maxBody, else 400.
func bodyError(err error) *apiError {
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return &apiError{status: http.StatusRequestEntityTooLarge, code: "body_too_large",
			msg: "request body: over the limit of " + strconv.FormatInt(mbe.Limit, 10) + " bytes"}
	}
	return &apiError{status: http.StatusBadRequest, code: "invalid_body", msg: "request body: " + err.Error()}
}
