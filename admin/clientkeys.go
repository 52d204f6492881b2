package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// Client API keys: a gateway that holds provider keys must not be an open proxy. A key is
// `sy-<id>_<secret>`: id is 8 random bytes in hex (public: it names the key in the admin API
// and lets the route role find its record directly), secret 32 random bytes in base64url.
// The store keeps SHA-256 of the whole key, never the key, which is shown once, in the answer
// to its creation. A fast hash is enough here: a slow password hash (bcrypt, argon2) defends
// low-entropy secrets against guessing, while a 256-bit random secret cannot be guessed or
// inverted from its SHA-256; a slow hash would only add latency to every request.

// ClientKeyPrefix starts every client key, so a leaked one is recognisable (secret scanners).
const ClientKeyPrefix = "sy-"

const (
	clientKeyIDBytes     = 8
	clientKeySecretBytes = 32
)

// Verifier checks client keys for the route role, through a cache of the keys it verified
// (keycache.go).
type Verifier struct {
	keys  store.ClientKeys
	cache *keyCache
}

// NewVerifier returns a verifier reading keys from ks, cached as opts say.
func NewVerifier(ks store.ClientKeys, opts VerifierOptions) *Verifier {
	return &Verifier{keys: ks, cache: newKeyCache(ks, opts)}
}

// CachedKeys is the number of keys the verifier holds (for readiness).
func (v *Verifier) CachedKeys() int { return v.cache.size() }

// Verify checks a presented key (the bearer token or x-api-key of a client request). ok
// false means unknown, malformed or revoked (the client dialect's 401); with ok, models is
// the key's allow-list of public models (empty: every model), which the route role applies
// to the requested model (403) and to its fallbacks (skipped). err is a store failure (a key not
// in the cache could not be checked). The hash comparison is constant-time; which ids exist is not
// secret.
func (v *Verifier) Verify(ctx context.Context, presented string) (ok bool, models []string, err error) {
	id, ok := clientKeyID(presented)
	if !ok {
		return false, nil, nil
	}
	k, err := v.cache.lookup(ctx, v.keys, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, fmt.Errorf("verifying client key %s: %w", id, err)
	}
	sum := sha256.Sum256([]byte(presented))
	if subtle.ConstantTimeCompare(sum[:], k.Hash) != 1 {
		return false, nil, nil
	}
	return true, k.Models, nil
}

// clientKeyID extracts the id of a well-formed key.
func clientKeyID(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, ClientKeyPrefix)
	if !ok {
		return "", false
	}
	id, secret, ok := strings.Cut(rest, "_")
	if !ok || len(id) != 2*clientKeyIDBytes || len(secret) != base64.RawURLEncoding.EncodedLen(clientKeySecretBytes) {
		return "", false
	}
	if _, err := hex.DecodeString(id); err != nil {
		return "", false
	}
	return id, true
}

// newClientKey draws a key from r and returns its id and the key.
func newClientKey(r io.Reader) (id, key string, err error) {
	b := make([]byte, clientKeyIDBytes+clientKeySecretBytes)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", "", fmt.Errorf("drawing a client key: %w", err)
	}
	id = hex.EncodeToString(b[:clientKeyIDBytes])
	return id, ClientKeyPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(b[clientKeyIDBytes:]), nil
}

// clientKeyView is a key as listed: never the key or its hash.
type clientKeyView struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	Models    []string  `json:"models"`
	CreatedAt time.Time `json:"createdAt"`
	// Key is set only in the answer to the creation.
	Key string `json:"key,omitempty"`
}

func viewOf(k store.ClientKey) clientKeyView {
	models := k.Models
	if models == nil {
		models = []string{}
	}
	return clientKeyView{ID: k.ID, Name: k.Name, Models: models, CreatedAt: k.CreatedAt}
}

// clientKeyRequest is the body of POST /admin/client-keys.
type clientKeyRequest struct {
	Name   string   `json:"name"`
	Models []string `json:"models"`
}

func (r clientKeyRequest) validate() error {
	if len(r.Name) > 128 {
		return badField("name", "at most 128 characters")
	}
	if len(r.Models) > 256 {
		return badField("models", "at most 256 models")
	}
	seen := make(map[string]bool, len(r.Models))
	for i, m := range r.Models {
		field := fmt.Sprintf("models[%d]", i)
		if m == "" || len(m) > 256 {
			return badField(field, "a public model name of 1 to 256 characters")
		}
		if seen[m] {
			return badField(field, fmt.Sprintf("duplicate model %q", m))
		}
		seen[m] = true
	}
	return nil
}

// routeClientKeys: create (the key shown once), list, read, revoke. Keys are not part of the
// configuration version, so these endpoints carry no ETag.
func (a *api) routeClientKeys(mux *http.ServeMux) {
	mux.HandleFunc("POST /admin/client-keys", func(w http.ResponseWriter, req *http.Request) {
		var body clientKeyRequest
		dec := json.NewDecoder(http.MaxBytesReader(nil, req.Body, maxBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil && !errors.Is(err, io.EOF) {
			a.answer(w, req, bodyError(err))
			return
		}
		if err := body.validate(); err != nil {
			a.answer(w, req, err)
			return
		}
		id, key, err := newClientKey(a.rand)
		if err != nil {
			a.answer(w, req, err)
			return
		}
		sum := sha256.Sum256([]byte(key))
		k := store.ClientKey{ID: id, Name: body.Name, Hash: sum[:], Models: body.Models, CreatedAt: a.now().UTC()}
		if err := a.keys.CreateClientKey(req.Context(), k); err != nil {
			// ErrExists needs a 64-bit id collision: reported, not retried.
			a.answer(w, req, err)
			return
		}
		a.log.Info("client key created", "id", id, "models", len(body.Models))
		v := viewOf(k)
		v.Key = key
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusCreated, v)
	})
	mux.HandleFunc("GET /admin/client-keys", func(w http.ResponseWriter, req *http.Request) {
		ks, err := a.keys.ListClientKeys(req.Context())
		if err != nil {
			a.answer(w, req, err)
			return
		}
		views := make([]clientKeyView, len(ks))
		for i, k := range ks {
			views[i] = viewOf(k)
		}
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": views})
	})
	mux.HandleFunc("GET /admin/client-keys/{id}", func(w http.ResponseWriter, req *http.Request) {
		k, err := a.keys.ClientKey(req.Context(), req.PathValue("id"))
		if errors.Is(err, store.ErrNotFound) {
			err = notFound(fmt.Sprintf("Client key %q", req.PathValue("id")))
		}
		if err != nil {
			a.answer(w, req, err)
			return
		}
		writeJSON(w, http.StatusOK, viewOf(k))
	})
	mux.HandleFunc("DELETE /admin/client-keys/{id}", func(w http.ResponseWriter, req *http.Request) {
		id := req.PathValue("id")
		err := a.keys.DeleteClientKey(req.Context(), id)
		if errors.Is(err, store.ErrNotFound) {
			err = notFound(fmt.Sprintf("Client key %q", id))
		}
		if err != nil {
			a.answer(w, req, err)
			return
		}
		a.log.Info("client key revoked", "id", id)
		w.WriteHeader(http.StatusNoContent)
	})
}
