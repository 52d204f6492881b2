package attemptstate

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// StateKeysEnv is the environment variable holding the state keys: comma-separated base64
// 32-byte keys, the current one first. Keys are secrets, so there is no flag for them (a
// flag's value shows in ps).
const StateKeysEnv = "SWITCHYARD_STATE_KEYS"

// Keys are the state keys of a replica: every replica of a deployment holds the same.
type Keys struct {
	// Current seals, and opens.
	Current []byte
	// Previous, when set, only opens: the key being rotated out (or in).
	Previous []byte
}

// LoadKeys reads the state keys from file (one base64 key per line, the current one first;
// blank lines and lines starting with # are ignored) when file is not empty, else from the
// environment variable StateKeysEnv read through lookupEnv (os.LookupEnv in production).
// Keys may be in standard or URL-safe base64, padded or not (`openssl rand -base64 32`).
func LoadKeys(lookupEnv func(string) (string, bool), file string) (Keys, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return Keys{}, fmt.Errorf("reading the state key file: %w", err)
		}
		k, err := parseKeys(strings.Split(string(b), "\n"))
		if err != nil {
			return Keys{}, fmt.Errorf("state key file %s: %w", file, err)
		}
		return k, nil
	}
	v, ok := lookupEnv(StateKeysEnv)
	if !ok || strings.TrimSpace(v) == "" {
		return Keys{}, fmt.Errorf("no state keys: set %s or give a key file", StateKeysEnv)
	}
	k, err := parseKeys(strings.Split(v, ","))
	if err != nil {
		return Keys{}, fmt.Errorf("%s: %w", StateKeysEnv, err)
	}
	return k, nil
}

func parseKeys(items []string) (Keys, error) {
	var keys [][]byte
	for _, it := range items {
		it = strings.TrimSpace(it)
		if it == "" || strings.HasPrefix(it, "#") {
			continue
		}
		k, err := decodeKey(it)
		if err != nil {
			// Never echo the value: it is a secret, even when malformed.
			return Keys{}, fmt.Errorf("key %d: %w", len(keys)+1, err)
		}
		keys = append(keys, k)
	}
	switch len(keys) {
	case 0:
		return Keys{}, errors.New("no keys")
	case 1:
		return Keys{Current: keys[0]}, nil
	case 2:
		return Keys{Current: keys[0], Previous: keys[1]}, nil
	}
	return Keys{}, fmt.Errorf("%d keys; at most two (current, previous)", len(keys))
}

func decodeKey(s string) ([]byte, error) {
	var k []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err = enc.DecodeString(s); err == nil {
			break
		}
	}
	if err != nil {
		return nil, errors.New("not base64")
	}
	if len(k) != KeySize {
		return nil, fmt.Errorf("decodes to %d bytes; a state key is %d bytes (generate one with `openssl rand -base64 32`)", len(k), KeySize)
	}
	return k, nil
}
