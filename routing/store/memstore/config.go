package memstore

import (
	"context"
	"maps"
	"slices"
	"sort"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// configState is the persisted configuration. Messages are cloned on the way in and out, so
// callers can never mutate stored state through a pointer they kept.
type configState struct {
	version     uint64
	settings    *configv1.RouterSettings
	deployments map[string]*configv1.Deployment
	secrets     map[string]string
	chains      map[chainKey]*configv1.FallbackChain
	policies    map[string]*configv1.ModelPolicy
}

type chainKey struct{ model, reason string }

func newConfigState() configState {
	return configState{
		deployments: make(map[string]*configv1.Deployment),
		secrets:     make(map[string]string),
		chains:      make(map[chainKey]*configv1.FallbackChain),
		policies:    make(map[string]*configv1.ModelPolicy),
	}
}

// LoadConfig implements store.ConfigStore.
func (s *Store) LoadConfig(context.Context) (store.ConfigSnapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &s.config
	cfg := &configv1.Config{}
	if c.settings != nil {
		cfg.RouterSettings = proto.Clone(c.settings).(*configv1.RouterSettings)
	}
	for _, id := range slices.Sorted(maps.Keys(c.deployments)) {
		cfg.Deployments = append(cfg.Deployments, proto.Clone(c.deployments[id]).(*configv1.Deployment))
	}
	chainKeys := make([]chainKey, 0, len(c.chains))
	for k := range c.chains {
		chainKeys = append(chainKeys, k)
	}
	sort.Slice(chainKeys, func(i, j int) bool {
		if chainKeys[i].model != chainKeys[j].model {
			return chainKeys[i].model < chainKeys[j].model
		}
		return chainKeys[i].reason < chainKeys[j].reason
	})
	for _, k := range chainKeys {
		cfg.FallbackChains = append(cfg.FallbackChains, proto.Clone(c.chains[k]).(*configv1.FallbackChain))
	}
	for _, m := range slices.Sorted(maps.Keys(c.policies)) {
		cfg.ModelPolicies = append(cfg.ModelPolicies, proto.Clone(c.policies[m]).(*configv1.ModelPolicy))
	}
	secrets := make(map[string]string, len(c.secrets))
	for k, v := range c.secrets {
		secrets[k] = v
	}
	return store.ConfigSnapshot{Version: c.version, Config: cfg, Secrets: secrets}, nil
}

// ConfigVersion implements store.ConfigStore.
func (s *Store) ConfigVersion(context.Context) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.config.version, nil
}

// ReplaceConfig implements store.ConfigStore.
func (s *Store) ReplaceConfig(_ context.Context, cfg *configv1.Config) (uint64, error) {
	return s.write(func(c *configState) error {
		c.replace(cfg)
		return nil
	})
}

// ReplaceConfigIf implements store.ConfigStore: the version check and the replacement happen
// under one lock.
func (s *Store) ReplaceConfigIf(_ context.Context, expected uint64, cfg *configv1.Config) (uint64, error) {
	return s.write(func(c *configState) error {
		if c.version != expected {
			return store.ErrVersionConflict
		}
		c.replace(cfg)
		return nil
	})
}

// RestoreConfig implements store.ConfigStore. One process holds the memory store and serves
// from it, so its version never goes backwards; the method exists for the interface's
// contract (and the conformance suite).
func (s *Store) RestoreConfig(_ context.Context, version uint64, cfg *configv1.Config) (uint64, bool, error) {
	s.mu.Lock()
	if s.config.version >= version {
		v := s.config.version
		s.mu.Unlock()
		return v, false, nil
	}
	s.config.replace(cfg)
	s.config.version = version
	s.mu.Unlock()
	s.watchers.Notify(version)
	return version, true, nil
}

// replace swaps in cfg; deployments without an apiKey keep their stored secret.
func (c *configState) replace(cfg *configv1.Config) {
	old, version := c.secrets, c.version
	*c = newConfigState()
	c.version = version
	if cfg.GetRouterSettings() != nil {
		c.settings = proto.Clone(cfg.GetRouterSettings()).(*configv1.RouterSettings)
	}
	for _, d := range cfg.GetDeployments() {
		if d.GetApiKey() == "" && old[d.GetId()] != "" {
			c.secrets[d.GetId()] = old[d.GetId()]
		}
		c.putDeployment(d)
	}
	for _, ch := range cfg.GetFallbackChains() {
		c.chains[chainKey{ch.GetPublicModel(), ch.GetReason()}] = proto.Clone(ch).(*configv1.FallbackChain)
	}
	for _, p := range cfg.GetModelPolicies() {
		c.policies[p.GetPublicModel()] = proto.Clone(p).(*configv1.ModelPolicy)
	}
}

func (c *configState) putDeployment(d *configv1.Deployment) {
	d = proto.Clone(d).(*configv1.Deployment)
	if key := d.GetApiKey(); key != "" {
		c.secrets[d.GetId()] = key
	}
	d.ApiKey = ""
	c.deployments[d.GetId()] = d
}

// write applies fn under the lock, bumps the version and notifies watchers.
func (s *Store) write(fn func(*configState) error) (uint64, error) {
	s.mu.Lock()
	if err := fn(&s.config); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	s.config.version++
	v := s.config.version
	s.mu.Unlock()
	s.watchers.Notify(v)
	return v, nil
}

// WatchConfig implements store.ConfigStore.
func (s *Store) WatchConfig(ctx context.Context) <-chan uint64 {
	return s.watchers.Add(ctx)
}
