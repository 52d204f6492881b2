package admin

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// MasterKeyEnv is the environment variable holding the master key.
const MasterKeyEnv = "SWITCHYARD_MASTER_KEY"

// LoadMasterKey returns the master key from the file at path (a -master-key-file flag: the
// flag carries a path, so the key never shows in `ps`) or, when path is empty, from the
// MasterKeyEnv variable read through getenv. Surrounding whitespace (a file's trailing
// newline) is dropped. Both set is an error rather than a silent choice; neither set returns
// "" and no error, and the authenticated endpoints then refuse every request.
func LoadMasterKey(getenv func(string) string, path string) (string, error) {
	env := getenv(MasterKeyEnv)
	if path == "" {
		return strings.TrimSpace(env), nil
	}
	if env != "" {
		return "", errors.New("master key: both " + MasterKeyEnv + " and a key file are set; use one")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("master key: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("master key: %s is empty", path)
	}
	return key, nil
}

// authorized compares the bearer token with the master key in constant time.
func authorized(req *http.Request, key string) bool {
	if key == "" {
		return false
	}
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(token), []byte(key)) == 1
}

// requireMaster answers 401 to any request without the master key.
func requireMaster(key string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !authorized(req, key) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard"`)
			writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "A valid master key is required.")
			return
		}
		next.ServeHTTP(w, req)
	})
}
