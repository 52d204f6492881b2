package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// writeConfig copies the demo configuration into dir with every deployment's baseUrl
// pointing at the fake of its provider kind (the committed file names the default ports;
// the fakes may listen elsewhere), and returns the copy's path.
func writeConfig(path, dir string, baseURLs map[string]string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("demo configuration: %w", err)
	}
	out := string(raw)
	for i, d := range gjson.Get(out, "deployments").Array() {
		kind := d.Get("provider").String()
		u, ok := baseURLs[kind]
		if !ok {
			return "", fmt.Errorf("%s: deployments[%d].provider %q has no fake in the demo", path, i, kind)
		}
		if out, err = sjson.Set(out, "deployments."+strconv.Itoa(i)+".baseUrl", u); err != nil {
			return "", fmt.Errorf("%s: deployments[%d].baseUrl: %w", path, i, err)
		}
	}
	dst := filepath.Join(dir, "demo.json")
	if err := os.WriteFile(dst, []byte(out), 0o600); err != nil {
		return "", fmt.Errorf("demo configuration: %w", err)
	}
	return dst, nil
}
