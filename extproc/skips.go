package extproc

import (
	"log/slog"

	"github.com/switchyard-gw/switchyard/routing"
)

// Skips (behaviour §9.2): the deployments and fallback models routing passed over and why
// travel in the state, and show in the request's log record, in unified_routing and in
// switchyard_skips_total (metrics.go).

// skipRecord is one skipped target, as unified_routing and the request's log record show it.
type skipRecord struct {
	Deployment string `json:"deployment,omitempty"` // empty: the whole model
	Model      string `json:"model"`
	// Reason is routing.SkipCause: capability, policy, limit or unserved.
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

func skipRecords(skips []routing.Skip) []skipRecord {
	if len(skips) == 0 {
		return nil
	}
	out := make([]skipRecord, len(skips))
	for i, k := range skips {
		out[i] = skipRecord{Deployment: k.Deployment, Model: k.Model, Reason: k.Cause.String(), Detail: k.Why}
	}
	return out
}

// skippedAttr is the request log record's "skipped" attribute; none (an empty Attr, which
// handlers leave out) without skips.
func skippedAttr(skips []routing.Skip) slog.Attr {
	if len(skips) == 0 {
		return slog.Attr{}
	}
	return slog.Any("skipped", skipRecords(skips))
}
