package config

import (
	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
)

// MergeSettings applies a PUT /admin/router-settings body to the current settings
// (SPEC §11.1): every field sent replaces the current value, omitted fields keep theirs. The
// execution-policy matrix is replaced as a whole when sent (SPEC §6.3), never merged cell by
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
