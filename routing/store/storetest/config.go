package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/store"
)

func deployment(id, model, key string) *configv1.Deployment {
	return &configv1.Deployment{
		Id: id, PublicModel: model, Provider: "openai", BaseUrl: "https://api.openai.com",
		ProviderModel: model, ApiKey: key, Weight: proto.Uint32(1),
	}
}

func load(t *testing.T, s store.Store) store.ConfigSnapshot {
	t.Helper()
	snap, err := s.LoadConfig(t.Context())
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	return snap
}

func runConfig(t *testing.T, f Factory) {
	t.Run("SecretsAreKeptApart", func(t *testing.T) {
		s, _ := open(t, f)
		in := deployment("d1", "gpt-4o", "sk-secret-1")
		v1, err := s.ReplaceConfig(t.Context(), &configv1.Config{Deployments: []*configv1.Deployment{in}})
		if err != nil {
			t.Fatal(err)
		}
		if in.GetApiKey() != "sk-secret-1" {
			t.Fatal("ReplaceConfig mutated its argument")
		}
		snap := load(t, s)
		if snap.Version != v1 || len(snap.Config.GetDeployments()) != 1 {
			t.Fatalf("loaded version %d with %d deployments, want %d and 1", snap.Version, len(snap.Config.GetDeployments()), v1)
		}
		if got := snap.Config.GetDeployments()[0].GetApiKey(); got != "" {
			t.Fatalf("loaded deployment carries apiKey %q; secrets must come only through Secrets", got)
		}
		if snap.Secrets["d1"] != "sk-secret-1" {
			t.Fatalf("secret = %q", snap.Secrets["d1"])
		}
		// An update without a key keeps the stored one (write-only keys cannot be resent).
		upd := deployment("d1", "gpt-4o", "")
		upd.Weight = proto.Uint32(5)
		v2, err := s.ReplaceConfig(t.Context(), &configv1.Config{Deployments: []*configv1.Deployment{upd}})
		if err != nil {
			t.Fatal(err)
		}
		if v2 <= v1 {
			t.Fatalf("version did not increase: %d then %d", v1, v2)
		}
		snap = load(t, s)
		if snap.Secrets["d1"] != "sk-secret-1" || snap.Config.GetDeployments()[0].GetWeight() != 5 {
			t.Fatalf("after keyless update: secret %q weight %d", snap.Secrets["d1"], snap.Config.GetDeployments()[0].GetWeight())
		}
		if _, err := s.ReplaceConfig(t.Context(), &configv1.Config{Deployments: []*configv1.Deployment{deployment("d1", "gpt-4o", "sk-rotated")}}); err != nil {
			t.Fatal(err)
		}
		if got := load(t, s).Secrets["d1"]; got != "sk-rotated" {
			t.Fatalf("rotated secret = %q", got)
		}
		if _, err := s.ReplaceConfig(t.Context(), &configv1.Config{}); err != nil {
			t.Fatal(err)
		}
		snap = load(t, s)
		if len(snap.Config.GetDeployments()) != 0 || snap.Secrets["d1"] != "" {
			t.Fatalf("removing the deployment left %d deployments and secret %q", len(snap.Config.GetDeployments()), snap.Secrets["d1"])
		}
	})

	t.Run("ChainsPoliciesSettings", func(t *testing.T) {
		s, _ := open(t, f)
		ch := &configv1.FallbackChain{PublicModel: "gpt-4o", Reason: "general", Targets: []string{"gpt-4o-mini"}}
		ctxw := &configv1.FallbackChain{PublicModel: "gpt-4o", Reason: "context_window", Targets: []string{"gpt-4.1"}}
		pol := &configv1.ModelPolicy{PublicModel: "gpt-4o", CrossModelFallbackAllowed: proto.Bool(false)}
		rs := &configv1.RouterSettings{RoutingStrategy: proto.String("least-busy"), AllowedFails: proto.Uint32(0)}
		cfg := &configv1.Config{RouterSettings: rs, FallbackChains: []*configv1.FallbackChain{ch, ctxw}, ModelPolicies: []*configv1.ModelPolicy{pol}}
		if _, err := s.ReplaceConfig(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
		snap := load(t, s)
		if len(snap.Config.GetFallbackChains()) != 2 || !proto.Equal(snap.Config.GetModelPolicies()[0], pol) {
			t.Fatalf("chains/policies not stored: %v", snap.Config)
		}
		got := snap.Config.GetRouterSettings()
		if !proto.Equal(got, rs) || got.AllowedFails == nil {
			t.Fatalf("settings = %v, want %v with allowedFails present as 0", got, rs)
		}
		if _, err := s.ReplaceConfig(t.Context(), &configv1.Config{FallbackChains: []*configv1.FallbackChain{ctxw}}); err != nil {
			t.Fatal(err)
		}
		snap = load(t, s)
		if len(snap.Config.GetFallbackChains()) != 1 || snap.Config.GetFallbackChains()[0].GetReason() != "context_window" ||
			len(snap.Config.GetModelPolicies()) != 0 || snap.Config.GetRouterSettings() != nil {
			t.Fatalf("after replacing with one chain: %v", snap.Config)
		}
	})

	t.Run("ReplaceKeepsSecretsOfKeylessDeployments", func(t *testing.T) {
		s, _ := open(t, f)
		if _, err := s.ReplaceConfig(t.Context(), &configv1.Config{Deployments: []*configv1.Deployment{deployment("d1", "m", "k1"), deployment("gone", "m", "k2")}}); err != nil {
			t.Fatal(err)
		}
		cfg := &configv1.Config{Deployments: []*configv1.Deployment{deployment("d1", "m", ""), deployment("d2", "m", "k3")}}
		if _, err := s.ReplaceConfig(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
		snap := load(t, s)
		if len(snap.Config.GetDeployments()) != 2 || snap.Secrets["d1"] != "k1" || snap.Secrets["d2"] != "k3" || snap.Secrets["gone"] != "" {
			t.Fatalf("after replace: %d deployments, secrets %v", len(snap.Config.GetDeployments()), redacted(snap.Secrets))
		}
	})

	t.Run("ReplaceIfComparesVersions", func(t *testing.T) {
		s, replica := open(t, f)
		other := replica()
		// An empty store is at version 0.
		v1, err := s.ReplaceConfigIf(ctx(t), 0, &configv1.Config{Deployments: []*configv1.Deployment{deployment("d1", "m", "k1")}})
		if err != nil {
			t.Fatal(err)
		}
		// Read-modify-write on another replica: the keyless deployment keeps its secret.
		snap := load(t, other)
		snap.Config.Deployments[0].Weight = proto.Uint32(9)
		v2, err := other.ReplaceConfigIf(ctx(t), snap.Version, snap.Config)
		if err != nil || v2 <= v1 {
			t.Fatalf("ReplaceConfigIf(%d) = %d, %v; want a version above %d", snap.Version, v2, err, v1)
		}
		// A stale version changes nothing.
		stale := &configv1.Config{Deployments: []*configv1.Deployment{deployment("other", "m", "k9")}}
		if _, err := s.ReplaceConfigIf(ctx(t), v1, stale); !errors.Is(err, store.ErrVersionConflict) {
			t.Fatalf("stale ReplaceConfigIf: %v, want ErrVersionConflict", err)
		}
		got := load(t, s)
		if got.Version != v2 || len(got.Config.GetDeployments()) != 1 || got.Config.GetDeployments()[0].GetWeight() != 9 || got.Secrets["d1"] != "k1" || got.Secrets["other"] != "" {
			t.Fatalf("after a refused write: version %d (want %d), config %v, secrets %v", got.Version, v2, got.Config, redacted(got.Secrets))
		}
		// Many writers on one version across replicas: exactly one wins.
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			r := replica()
			wg.Add(1)
			go func() {
				defer wg.Done()
				cfg := &configv1.Config{Deployments: []*configv1.Deployment{deployment(fmt.Sprintf("w%d", i), "m", "")}}
				_, errs[i] = r.ReplaceConfigIf(ctx(t), v2, cfg)
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, store.ErrVersionConflict):
				t.Fatalf("concurrent ReplaceConfigIf: %v", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d of %d writers on version %d succeeded, want exactly 1", won, n, v2)
		}
		if got := load(t, s); got.Version != v2+1 || len(got.Config.GetDeployments()) != 1 {
			t.Fatalf("after the race: version %d with %d deployments, want %d with 1", got.Version, len(got.Config.GetDeployments()), v2+1)
		}
	})

	t.Run("RestoreOnlyWhenBehindHighestWins", func(t *testing.T) {
		s, replica := open(t, f)
		cfgOf := func(id string) *configv1.Config {
			return &configv1.Config{Deployments: []*configv1.Deployment{deployment(id, "m", "sk-"+id)}}
		}
		// An empty store is behind any served version: restored at exactly that version, the
		// keys included.
		v, restored, err := s.RestoreConfig(ctx(t), 7, cfgOf("served"))
		if err != nil || !restored || v != 7 {
			t.Fatalf("RestoreConfig(7) on an empty store = %d, %v, %v; want 7, restored", v, restored, err)
		}
		snap := load(t, s)
		if snap.Version != 7 || len(snap.Config.GetDeployments()) != 1 || snap.Secrets["served"] != "sk-served" {
			t.Fatalf("after restore: version %d, %v, secrets %v", snap.Version, snap.Config, redacted(snap.Secrets))
		}
		// Not behind (equal or newer): nothing changes.
		for _, old := range []uint64{7, 6} {
			v, restored, err := replica().RestoreConfig(ctx(t), old, cfgOf("stale"))
			if err != nil || restored || v != 7 {
				t.Fatalf("RestoreConfig(%d) at version 7 = %d, %v, %v; want 7, not restored", old, v, restored, err)
			}
		}
		// The next write follows the restored version.
		if v, err := s.ReplaceConfigIf(ctx(t), 7, cfgOf("next")); err != nil || v != 8 {
			t.Fatalf("write after the restore = %d, %v; want version 8", v, err)
		}
		// Replicas racing with different served versions: the highest is what stays, and
		// exactly one call restores it.
		_, replica2 := open(t, f)
		const n = 6
		var wg sync.WaitGroup
		type result struct {
			v        uint64
			restored bool
			err      error
		}
		res := make([]result, n)
		for i := range n {
			r := replica2()
			wg.Add(1)
			go func() {
				defer wg.Done()
				ver := uint64(10 + i%3) // 10, 11, 12 twice each
				v, ok, err := r.RestoreConfig(ctx(t), ver, cfgOf(fmt.Sprintf("r%d", ver)))
				res[i] = result{v, ok, err}
			}()
		}
		wg.Wait()
		won12 := 0
		for i, r := range res {
			if r.err != nil {
				t.Fatalf("racing restore: %v", r.err)
			}
			if r.restored && r.v == 12 {
				won12++
			}
			if !r.restored && r.v < uint64(10+i%3) {
				t.Fatalf("restore of %d refused with stored version %d below it", 10+i%3, r.v)
			}
		}
		got := load(t, replica2())
		if won12 != 1 || got.Version != 12 || len(got.Config.GetDeployments()) != 1 || got.Config.GetDeployments()[0].GetId() != "r12" {
			t.Fatalf("after the race: %d restores of 12, version %d, %v; want one, 12 and r12", won12, got.Version, got.Config)
		}
	})

	t.Run("ChangesReachEveryReplica", func(t *testing.T) {
		s, replica := open(t, f)
		other := replica()
		watch := other.WatchConfig(t.Context())
		v, err := s.ReplaceConfig(t.Context(), &configv1.Config{Deployments: []*configv1.Deployment{deployment("d1", "m", "k")}})
		if err != nil {
			t.Fatal(err)
		}
		timeout := time.After(10 * time.Second)
		for {
			select {
			case got, ok := <-watch:
				if !ok {
					t.Fatal("watch channel closed")
				}
				if got < v {
					continue
				}
				snap := load(t, other)
				if snap.Version < v || len(snap.Config.GetDeployments()) != 1 {
					t.Fatalf("replica loaded version %d with %d deployments after notification of %d", snap.Version, len(snap.Config.GetDeployments()), v)
				}
				if cv, err := other.ConfigVersion(t.Context()); err != nil || cv < v {
					t.Fatalf("ConfigVersion = %d, %v; want ≥ %d", cv, err, v)
				}
				return
			case <-timeout:
				t.Fatalf("replica not notified of version %d within 10s", v)
			}
		}
	})
}

// redacted shows which secrets exist without printing them.
func redacted(m map[string]string) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = len(v)
	}
	return out
}
