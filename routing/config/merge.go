package config

import (
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

// PatchSettings is the settings part of PUT /admin/router-settings (behaviour §11.1): it
// validates the patch alone, its errors naming the request body's fields (`allowedFails`),
// and merges it into current (MergeSettings), which is not modified. A patch valid alone can
// still break the configuration (a lowered global below a deployment's override, behaviour
// §6.3): the caller validates the whole configuration that results, once, as for every
// other change.
func (v *Validator) PatchSettings(current, patch *configv1.RouterSettings) (*configv1.RouterSettings, error) {
	if err := v.Message("", patch); err != nil {
		return nil, err
	}
	return MergeSettings(current, patch), nil
}
