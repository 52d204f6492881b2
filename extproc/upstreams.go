package extproc

import (
	"sync"

	"github.com/switchyard-gw/switchyard/extproc/provider"
	"github.com/switchyard-gw/switchyard/routing/config"
)

// upstreams caches each deployment's compiled provider endpoint per configuration snapshot,
// so an attempt parses no URL; a new snapshot starts a new cache.
type upstreams struct {
	mu   sync.Mutex
	snap *config.Snapshot
	byID map[string]*provider.Upstream
}

func (u *upstreams) get(snap *config.Snapshot, d *config.Deployment) (*provider.Upstream, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.snap != snap {
		u.snap, u.byID = snap, map[string]*provider.Upstream{}
	}
	if up, ok := u.byID[d.ID]; ok {
		return up, nil
	}
	up, err := provider.Compile(d)
	if err != nil {
		return nil, err
	}
	u.byID[d.ID] = up
	return up, nil
}
