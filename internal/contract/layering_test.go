package contract_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The layering the packages promise (README, "Layout"): the control plane knows the data
// plane only through this package, and the routing core knows neither, nor gRPC.
func TestLayering(t *testing.T) {
	const module = "github.com/switchyard-gw/switchyard/"
	cases := []struct {
		pkg       string
		forbidden []string
	}{
		{"xds", []string{module + "extproc"}},
		{"routing/...", []string{module + "extproc", module + "xds", "google.golang.org/grpc"}},
	}
	for _, tc := range cases {
		out, err := exec.Command("go", "list", "-deps", "-test=false", "../../"+tc.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", tc.pkg, err, out)
		}
		for dep := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
			for _, f := range tc.forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s depends on %s", tc.pkg, dep)
				}
			}
		}
	}
}
