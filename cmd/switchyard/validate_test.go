package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidate: `switchyard validate -config f` prints "ok" for a good file (JSON or YAML)
// and one line per error naming the field for a bad one, and then fails.
func TestValidate(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := "deployments:\n  - id: a\n    publicModel: m\n    provider: openai\n    baseUrl: https://api.example.com\n    providerModel: m\n"
	for _, path := range []string{"../../examples/switchyard.json", write("good.yaml", good)} {
		var out bytes.Buffer
		if err := validate([]string{"-config", path}, &out, &out); err != nil || out.String() != "ok\n" {
			t.Fatalf("%s: %v, output %q", path, err, out.String())
		}
	}
	for _, tc := range []struct{ name, body, want string }{
		{"weight.yaml", strings.Replace(good, "providerModel: m\n", "providerModel: m\n    weight: 2000000\n", 1), "deployments[0].weight"},
		{"unknown.json", `{"deployments":[],"routerSetings":{}}`, "routerSetings"},
		{"budget.yaml", good + "routerSettings:\n  executionPolicies:\n    text:\n      json: {maxAttempts: 50}\n", "maxAttempts"},
	} {
		var out bytes.Buffer
		err := validate([]string{"-config", write(tc.name, tc.body)}, &out, &out)
		if !errors.Is(err, errInvalid) || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s: %v, output %q, want an error naming %s", tc.name, err, out.String(), tc.want)
		}
	}
}
