package attemptstate

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestLoadKeysFromEnv(t *testing.T) {
	k1, k2 := testKey(1), testKey(2)
	for name, v := range map[string]string{
		"std padded":      base64.StdEncoding.EncodeToString(k1) + "," + base64.StdEncoding.EncodeToString(k2),
		"url raw, spaces": " " + base64.RawURLEncoding.EncodeToString(k1) + " , " + base64.RawStdEncoding.EncodeToString(k2) + " ",
	} {
		keys, err := LoadKeys(env(map[string]string{StateKeysEnv: v}), "")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(keys.Current, k1) || !bytes.Equal(keys.Previous, k2) {
			t.Errorf("%s: current %x previous %x", name, keys.Current, keys.Previous)
		}
	}
	keys, err := LoadKeys(env(map[string]string{StateKeysEnv: base64.StdEncoding.EncodeToString(k1)}), "")
	if err != nil || !bytes.Equal(keys.Current, k1) || keys.Previous != nil {
		t.Errorf("one key: %+v, %v", keys, err)
	}
}

func TestLoadKeysFromFile(t *testing.T) {
	k1, k2 := testKey(1), testKey(2)
	path := filepath.Join(t.TempDir(), "state-keys")
	text := "# rotated 2026-03-01\n" + base64.StdEncoding.EncodeToString(k1) + "\n\n" + base64.StdEncoding.EncodeToString(k2) + "\r\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	// The file wins over the environment.
	keys, err := LoadKeys(env(map[string]string{StateKeysEnv: base64.StdEncoding.EncodeToString(testKey(9))}), path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(keys.Current, k1) || !bytes.Equal(keys.Previous, k2) {
		t.Errorf("current %x previous %x", keys.Current, keys.Previous)
	}
	if _, err := LoadKeys(env(nil), filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing key file accepted")
	}
}

func TestLoadKeysRejects(t *testing.T) {
	secret := base64.StdEncoding.EncodeToString([]byte("sixteen byte key"))
	good := base64.StdEncoding.EncodeToString(testKey(1))
	cases := []struct {
		name, value, want string
	}{
		{"unset", "", "no state keys"},
		{"only commas", " , ", "no keys"},
		{"16-byte key", secret, "decodes to 16 bytes"},
		{"33-byte key", base64.StdEncoding.EncodeToString(append(testKey(1), 1)), "decodes to 33 bytes"},
		{"not base64", good + ",not*base64", "key 2: not base64"},
		{"three keys", good + "," + good + "," + good, "at most two"},
	}
	for _, c := range cases {
		vars := map[string]string{}
		if c.value != "" {
			vars[StateKeysEnv] = c.value
		}
		_, err := LoadKeys(env(vars), "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to say %q", c.name, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error shows the key: %v", c.name, err)
		}
	}
}
