package redisstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// The configuration is stored as deterministic proto binary: one string for the router
// settings, one hash per collection (deployments by id, chains by (model, reason), policies
// by model) and the API keys in a hash of their own, so nothing that reads the deployments
// can return a key by accident (behaviour §11.3). Every write is one script that also bumps the
// version and publishes it (lua/config_*.lua).

// encode is deterministic proto binary, so equal configurations store equal bytes.
func encode(m proto.Message) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}

// LoadConfig implements store.ConfigStore: one MULTI/EXEC (all keys share the {cfg} slot),
// so the version and the items are one consistent snapshot.
func (s *Store) LoadConfig(ctx context.Context) (store.ConfigSnapshot, error) {
	ctx, cancel := s.cfgCtx(ctx)
	defer cancel()
	var (
		version                           *redis.StringCmd
		settings                          *redis.StringCmd
		deps, secrets, chains, policiesHm *redis.MapStringStringCmd
	)
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		version = p.Get(ctx, s.keys.configVersion())
		settings = p.Get(ctx, s.keys.configSettings())
		deps = p.HGetAll(ctx, s.keys.configDeployments())
		secrets = p.HGetAll(ctx, s.keys.configSecrets())
		chains = p.HGetAll(ctx, s.keys.configChains())
		policiesHm = p.HGetAll(ctx, s.keys.configPolicies())
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return store.ConfigSnapshot{}, unavailable("load config", err)
	}
	snap := store.ConfigSnapshot{Config: &configv1.Config{}, Secrets: secrets.Val()}
	if snap.Secrets == nil {
		snap.Secrets = map[string]string{}
	}
	if v, err := version.Uint64(); err == nil {
		snap.Version = v
	}
	if b, err := settings.Bytes(); err == nil {
		rs := &configv1.RouterSettings{}
		if err := proto.Unmarshal(b, rs); err != nil {
			return store.ConfigSnapshot{}, fmt.Errorf("redisstore: load config: router settings: %w", err)
		}
		snap.Config.RouterSettings = rs
	}
	for _, id := range slices.Sorted(maps.Keys(deps.Val())) {
		d := &configv1.Deployment{}
		if err := proto.Unmarshal([]byte(deps.Val()[id]), d); err != nil {
			return store.ConfigSnapshot{}, fmt.Errorf("redisstore: load config: deployment %q: %w", id, err)
		}
		d.ApiKey = "" // never stored here; cleared again so a read can never carry one
		snap.Config.Deployments = append(snap.Config.Deployments, d)
	}
	for _, field := range slices.Sorted(maps.Keys(chains.Val())) {
		c := &configv1.FallbackChain{}
		if err := proto.Unmarshal([]byte(chains.Val()[field]), c); err != nil {
			return store.ConfigSnapshot{}, fmt.Errorf("redisstore: load config: fallback chain: %w", err)
		}
		snap.Config.FallbackChains = append(snap.Config.FallbackChains, c)
	}
	sort.SliceStable(snap.Config.FallbackChains, func(i, j int) bool {
		a, b := snap.Config.FallbackChains[i], snap.Config.FallbackChains[j]
		if a.GetPublicModel() != b.GetPublicModel() {
			return a.GetPublicModel() < b.GetPublicModel()
		}
		return a.GetReason() < b.GetReason()
	})
	for _, model := range slices.Sorted(maps.Keys(policiesHm.Val())) {
		p := &configv1.ModelPolicy{}
		if err := proto.Unmarshal([]byte(policiesHm.Val()[model]), p); err != nil {
			return store.ConfigSnapshot{}, fmt.Errorf("redisstore: load config: model policy %q: %w", model, err)
		}
		snap.Config.ModelPolicies = append(snap.Config.ModelPolicies, p)
	}
	return snap, nil
}

// ConfigVersion implements store.ConfigStore.
func (s *Store) ConfigVersion(ctx context.Context) (uint64, error) {
	ctx, cancel := s.cfgCtx(ctx)
	defer cancel()
	v, err := s.rdb.Get(ctx, s.keys.configVersion()).Uint64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable("config version", err)
	}
	return v, nil
}

// ReplaceConfig implements store.ConfigStore with lua/config_replace.lua.
func (s *Store) ReplaceConfig(ctx context.Context, cfg *configv1.Config) (uint64, error) {
	return s.replace(ctx, "replace config", "", cfg)
}

// ReplaceConfigIf implements store.ConfigStore: lua/config_replace.lua checks the version in
// the same script that writes, so the compare-and-swap is atomic on the server.
func (s *Store) ReplaceConfigIf(ctx context.Context, expected uint64, cfg *configv1.Config) (uint64, error) {
	return s.replace(ctx, "replace config if", strconv.FormatUint(expected, 10), cfg)
}

// replace runs lua/config_replace.lua; expected is empty for an unconditional replace.
func (s *Store) replace(ctx context.Context, op, expected string, cfg *configv1.Config) (uint64, error) {
	args, err := configArgs([]any{s.channel(), expected}, cfg)
	if err != nil {
		return 0, err
	}
	return s.configWrite(ctx, op, s.scripts.configReplace, s.configKeys(), args...)
}

// RestoreConfig implements store.ConfigStore with lua/config_restore.lua, which checks the
// stored version and writes in one script.
func (s *Store) RestoreConfig(ctx context.Context, version uint64, cfg *configv1.Config) (uint64, bool, error) {
	args, err := configArgs([]any{s.channel(), strconv.FormatUint(version, 10)}, cfg)
	if err != nil {
		return 0, false, err
	}
	ctx, cancel := s.cfgCtx(ctx)
	defer cancel()
	reply, err := s.scripts.configRestore.Run(ctx, s.rdb, s.configKeys(), args...).Int64Slice()
	if err != nil {
		return 0, false, unavailable("restore config", err)
	}
	if len(reply) != 2 {
		return 0, false, fmt.Errorf("redisstore: restore config: reply %v", reply)
	}
	return uint64(reply[1]), reply[0] == 1, nil
}

// configKeys are the keys of the whole-configuration scripts, in their KEYS order.
func (s *Store) configKeys() []string {
	k := s.keys
	return []string{k.configVersion(), k.configSettings(), k.configDeployments(), k.configSecrets(),
		k.configChains(), k.configPolicies()}
}

// configArgs appends cfg to args in the order replace_all (lua/config_common.lua) reads it.
func configArgs(args []any, cfg *configv1.Config) ([]any, error) {
	if rs := cfg.GetRouterSettings(); rs != nil {
		b, err := encode(rs)
		if err != nil {
			return nil, fmt.Errorf("redisstore: config: router settings: %w", err)
		}
		args = append(args, "1", b)
	} else {
		args = append(args, "0", "")
	}
	args = append(args, len(cfg.GetDeployments()))
	for _, d := range cfg.GetDeployments() {
		b, err := marshalDeployment(d)
		if err != nil {
			return nil, fmt.Errorf("redisstore: config: %w", err)
		}
		args = append(args, d.GetId(), b, d.GetApiKey())
	}
	args = append(args, len(cfg.GetFallbackChains()))
	for _, c := range cfg.GetFallbackChains() {
		b, err := encode(c)
		if err != nil {
			return nil, fmt.Errorf("redisstore: config: fallback chain: %w", err)
		}
		args = append(args, chainField(c.GetPublicModel(), c.GetReason()), b)
	}
	args = append(args, len(cfg.GetModelPolicies()))
	for _, p := range cfg.GetModelPolicies() {
		b, err := encode(p)
		if err != nil {
			return nil, fmt.Errorf("redisstore: config: model policy: %w", err)
		}
		args = append(args, p.GetPublicModel(), b)
	}
	return args, nil
}

// configWrite runs a config script and returns the new version; -1 means not found, -2 a
// version conflict.
func (s *Store) configWrite(ctx context.Context, op string, sc *luaScript, keys []string, args ...any) (uint64, error) {
	ctx, cancel := s.cfgCtx(ctx)
	defer cancel()
	v, err := sc.Run(ctx, s.rdb, keys, args...).Int64()
	if err != nil {
		return 0, unavailable(op, err)
	}
	switch v {
	case -1:
		return 0, store.ErrNotFound
	case -2:
		return 0, store.ErrVersionConflict
	}
	return uint64(v), nil
}

// channel is the pub/sub channel config scripts publish on; empty when publishing is
// switched off (a test of the polling fallback).
func (s *Store) channel() string {
	if !s.opts.publish {
		return ""
	}
	return s.keys.configChannel()
}

// marshalDeployment encodes d without its apiKey (kept in the secrets hash) and without
// touching the caller's message.
func marshalDeployment(d *configv1.Deployment) ([]byte, error) {
	if d.GetApiKey() != "" {
		d = proto.Clone(d).(*configv1.Deployment)
		d.ApiKey = ""
	}
	b, err := encode(d)
	if err != nil {
		return nil, fmt.Errorf("deployment %q: %w", d.GetId(), err)
	}
	return b, nil
}
