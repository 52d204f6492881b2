package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// binary builds the switchyard command once per test that needs the real process (exit
// status, usage).
func binary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "switchyard")
	// The go command that runs this test is on PATH (go test puts its GOROOT/bin first).
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command: %v", err)
	}
	cmd := exec.Command(goBin, "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Issue 16 item 13: `switchyard -h` exits 0 and lists validate; `switchyard validate` on a
// missing file says "not found" and exits 1; on a file with several errors it prints them
// all (decode errors of some elements, validation errors of others, unknown models).
func TestCommandLine(t *testing.T) {
	bin := binary(t)
	for _, args := range [][]string{{"-h"}, {"--help"}, {"validate", "-h"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "switchyard validate -config FILE") || !strings.Contains(string(out), "-config") {
			t.Errorf("switchyard %v: %v\n%s\nwant exit 0 and the usage listing validate", args, err, out)
		}
	}
	out, err := exec.Command(bin, "validate", "-config", filepath.Join(t.TempDir(), "nope.yaml")).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "not found") {
		t.Errorf("validate on a missing file: %v\n%s\nwant exit 1 saying not found", err, out)
	}
	out, err = exec.Command(bin, "-client-auth", "envoy", "-config", filepath.Join(t.TempDir(), "nope.yaml")).CombinedOutput()
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "not found") {
		t.Errorf("start on a missing file: %v\n%s\nwant exit 1 saying not found", err, out)
	}

	path := filepath.Join(t.TempDir(), "bad.yaml")
	bad := `deployments:
  - {id: a, publicModel: m, provider: openai, baseUrl: "https://api.example.com", providerModel: m}
  - {id: b, publicModel: m, provider: openai, baseUrl: "https://api.example.com", providerModel: m, weigth: 2}
  - {id: c, publicModel: m, provider: openai, baseUrl: "ftp://x", providerModel: m, weight: 2000000}
  - {id: d, publicModel: m, provider: openai, baseUrl: "https://api.example.com", providerModel: m, rpmLimit: -1}
fallbackChains:
  - {publicModel: m, reason: general, targets: [gpt-4o-mni]}
modelPolicies:
  - {publicModel: gtp-4o}
routerSetings: {}
`
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(bin, "validate", "-config", path).CombinedOutput()
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("validate on a bad file: %v\n%s", err, out)
	}
	for _, want := range []string{
		`deployments[1]: unknown field "weigth"`, "deployments[2].baseUrl", "deployments[2].weight",
		"deployments[3]: invalid value for uint64 field rpmLimit", `fallbackChains[0].targets[0]: no deployment serves model "gpt-4o-mni"`,
		`modelPolicies[0].publicModel: no deployment serves model "gtp-4o"`, "routerSetings: unknown field", "(7 errors)",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
}
