package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-gw/switchyard/admin"
	"github.com/switchyard-gw/switchyard/routing/config"
)

// storeSafety is what keeps the fleet serving through a store that fails or forgets: the
// configuration guard (a store restarted empty is restored from the configuration in force)
// and, with -client-auth keys, the verifier's cache of verified keys (a store outage refuses
// only keys this replica does not know). README "Operations" and docs/redis.md say what an
// operator sees.
type storeSafety struct {
	guard    *config.Guard
	verifier *admin.Verifier // nil unless -client-auth keys
}

// keyCache says whether client keys are checked (-client-auth keys) and how long a verified
// one is cached (-client-key-max-age).
type keyCache struct {
	on     bool
	maxAge time.Duration
}

func keyCacheOf(on bool, maxAge time.Duration) keyCache { return keyCache{on: on, maxAge: maxAge} }

// newStoreSafety builds the guard of live in st and, with keys on, the verifier, with their
// counters on reg.
func newStoreSafety(st *openedStore, live *config.Live, keys keyCache, p process) (*storeSafety, error) {
	reg, log := p.reg, p.log
	events := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchyard_config_store_events_total",
		Help: "Configuration guard events: behind (the store held an older configuration than the one in force, or none), " +
			"restored (this replica put it back), caught_up (another replica did), restore_failed (retried).",
	}, []string{"event"})
	for _, e := range []string{config.GuardBehind, config.GuardRestored, config.GuardCaughtUp, config.GuardRestoreFailed} {
		events.WithLabelValues(e) // present at 0, so alerts can use increase()
	}
	if err := reg.Register(events); err != nil {
		return nil, fmt.Errorf("registering the configuration guard's metrics: %w", err)
	}
	s := &storeSafety{guard: config.NewGuard(live, st, config.GuardOptions{Clock: p.clock, Logger: log,
		Count: func(e string) { events.WithLabelValues(e).Inc() }})}
	if !keys.on {
		return s, nil
	}
	lookups := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchyard_client_key_lookups_total",
		Help: "Client key lookups by outcome: cached (fresh in this replica's cache), store (read from the store), " +
			"stale (store unreachable, served from the cache), unavailable (store unreachable, key not cached: refused).",
	}, []string{"outcome"})
	for _, o := range []string{admin.KeyLookupCached, admin.KeyLookupStore, admin.KeyLookupStale, admin.KeyLookupUnavailable} {
		lookups.WithLabelValues(o)
	}
	if err := reg.Register(lookups); err != nil {
		return nil, fmt.Errorf("registering the client key cache's metrics: %w", err)
	}
	s.verifier = admin.NewVerifier(st, admin.VerifierOptions{MaxAge: keys.maxAge, Count: func(o string) { lookups.WithLabelValues(o).Inc() }})
	return s, nil
}

// check is the store's /readyz check: the store's own (Redis reachable?), the guard's and the
// key cache's state. A degraded store keeps the replica ready (it still serves: routing on
// local state, known client keys from the cache) and says why in the detail.
func (s *storeSafety) check(st *openedStore) func(context.Context) admin.Readiness {
	return func(ctx context.Context) admin.Readiness {
		r := admin.Readiness{Name: "store", Ready: true, Detail: st.name}
		if st.check != nil {
			r = st.check(ctx)
		}
		var parts []string
		if r.Detail != "" {
			parts = append(parts, r.Detail)
		}
		if g := s.guard.Status(); g.Behind {
			r.Degraded = true
			parts = append(parts, fmt.Sprintf("configuration store behind since %s: it held version %d, this replica serves %d; "+
				"restoring it, admin configuration writes refused (503 config_store_behind)",
				g.Since.UTC().Format("2006-01-02T15:04:05Z"), g.Stored, g.Served))
		}
		if s.verifier != nil && r.Degraded {
			parts = append(parts, fmt.Sprintf("client keys: the %d keys this replica verified keep working from its cache; "+
				"other keys are refused (503 auth_unavailable)", s.verifier.CachedKeys()))
		}
		r.Detail = strings.Join(parts, "; ")
		return r
	}
}
