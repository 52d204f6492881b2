package config

import (
	"errors"
	"strings"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
)

// MergeSettings applies a PUT /admin/router-settings body to the current settings
// (behaviour §11.1): every field sent replaces the current value, omitted fields keep theirs. The
// execution-policy matrix is replaced as a whole when sent (behaviour §6.3), never merged cell by
// cell, so a cell that drops idleMs really drops it.
func MergeSettings(cur, patch *configv1.RouterSettings) *configv1.RouterSettings {
	out := &configv1.RouterSettings{}
	if cur != nil {
		out = proto.CloneOf(cur)
	}
	if patch == nil {
		return out
	}
	p := proto.CloneOf(patch)
	matrix := p.ExecutionPolicies
	p.ExecutionPolicies = nil
	proto.Merge(out, p)
	if len(matrix) > 0 {
		out.ExecutionPolicies = matrix
	}
	return out
}

// ApplySettings is PUT /admin/router-settings in one call (behaviour §11.1): it validates the
// patch alone, merges it into cfg's settings (MergeSettings) and validates the whole
// configuration that would result, since a patch valid alone can still break it (a lowered
// global below a deployment's override, behaviour §6.3). It returns the merged settings, or a
// *ValidationError whose fields name the request body's own fields (`allowedFails`) and, for
// conflicts elsewhere, the configuration's (`deployments[2].executionPolicyOverrides…`).
// cfg is not modified.
func (v *Validator) ApplySettings(cfg *configv1.Config, patch *configv1.RouterSettings) (*configv1.RouterSettings, error) {
	if err := v.Message("", patch); err != nil {
		return nil, err
	}
	merged := MergeSettings(cfg.GetRouterSettings(), patch)
	next := &configv1.Config{}
	if cfg != nil {
		next = proto.CloneOf(cfg)
	}
	next.RouterSettings = merged
	if err := v.Stored(next); err != nil { // cfg is the stored configuration (Validator.Stored)
		var ve *ValidationError
		if errors.As(err, &ve) {
			for i := range ve.Errors {
				f := &ve.Errors[i].Field
				if *f == "routerSettings" {
					*f = ""
				}
				*f = strings.TrimPrefix(*f, "routerSettings.")
			}
		}
		return nil, err
	}
	return merged, nil
}
