package extproc

import (
	"fmt"

	"github.com/switchyard-gw/switchyard/routing/config"
)

// CheckRedirectBudget refuses a configuration whose maxAttempts the Envoy route cannot honour:
// every failed attempt comes back to the route role through one internal redirect, so a
// request makes at most max_internal_redirects attempts before a 307 would reach the client.
func CheckRedirectBudget(snap *config.Snapshot, maxRedirects int) error {
	if snap == nil {
		return nil
	}
	for _, op := range config.Operations() {
		for _, mode := range []config.Mode{config.ModeJSON, config.ModeStream} {
			if n := snap.Settings.Policy(op, mode).MaxAttempts; n > maxRedirects {
				return fmt.Errorf("executionPolicies[%q].%s.maxAttempts is %d but the Envoy route allows %d internal redirects (-max-internal-redirects): lower maxAttempts or raise both", op.String(), mode.String(), n, maxRedirects)
			}
		}
	}
	return nil
}
