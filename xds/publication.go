package xds

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Problems describes what is wrong with the publication while current is the configuration
// version in force, for /readyz: the last version that failed, when the one published lags
// current, and the deployments left out. Empty when all is published.
func (p Publication) Problems(current uint64) []string {
	var out []string
	if p.Failed != 0 && p.Published < current {
		out = append(out, fmt.Sprintf("xds: last publish failed: configuration version %d is not published "+
			"(Envoys keep version %d): %s", p.Failed, p.Published, p.Err))
	}
	if len(p.Omitted) > 0 {
		ids := slices.Sorted(maps.Keys(p.Omitted))
		for i, id := range ids {
			ids[i] = id + " (" + p.Omitted[id] + ")"
		}
		out = append(out, "xds: deployments left out of the snapshot, they get no traffic: "+strings.Join(ids, ", "))
	}
	return out
}
