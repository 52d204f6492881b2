package config

import (
	"fmt"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
)

// UnknownModels names the fallback chains and model policies that refer to a public model
// no deployment serves: valid for the admin API (a chain may be written before its
// deployments, or outlive them), but in a file it is almost always a typo, so
// `switchyard validate` reports it.
func UnknownModels(cfg *configv1.Config) []FieldError {
	models := make(map[string]bool)
	for _, d := range cfg.GetDeployments() {
		models[d.GetPublicModel()] = true
	}
	var out []FieldError
	unknown := func(field, model string) {
		if model != "" && !models[model] {
			out = append(out, FieldError{Field: field, Message: fmt.Sprintf("no deployment serves model %q", model)})
		}
	}
	for i, c := range cfg.GetFallbackChains() {
		unknown(fmt.Sprintf("fallbackChains[%d].publicModel", i), c.GetPublicModel())
		for j, t := range c.GetTargets() {
			unknown(fmt.Sprintf("fallbackChains[%d].targets[%d]", i, j), t)
		}
	}
	for i, p := range cfg.GetModelPolicies() {
		unknown(fmt.Sprintf("modelPolicies[%d].publicModel", i), p.GetPublicModel())
	}
	return out
}
