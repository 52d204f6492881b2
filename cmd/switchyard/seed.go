package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// seed puts the configuration file into the store. A memory store always takes it. A shared
// store takes it only when it holds no configuration yet (version 0) or when overwrite is set:
// once replicas share a configuration, the admin API owns it and a restarting replica must not
// roll it back to its file.
func seed(ctx context.Context, st store.ConfigStore, kind string, cfg *configv1.Config, overwrite bool, log *slog.Logger) error {
	if kind != "memory" && !overwrite {
		v, err := st.ConfigVersion(ctx)
		if err != nil {
			return fmt.Errorf("reading the shared configuration version: %w", err)
		}
		if v != 0 {
			log.Info("the shared store already holds a configuration; the file is not applied (use -config-overwrite to replace it)", "version", v)
			return nil
		}
	}
	if _, err := st.ReplaceConfig(ctx, cfg); err != nil {
		return fmt.Errorf("seeding the store: %w", err)
	}
	return nil
}

// Backoff of seedWhenReachable: a first retry soon after the store's own recovery check,
// then no more than one attempt every few seconds.
const (
	seedMinBackoff = 250 * time.Millisecond
	seedMaxBackoff = 5 * time.Second
)

// seedWhenReachable repeats seed, with backoff, until it succeeds or ctx is done: a replica
// that started while its shared store was unreachable must still seed it when it comes back
// empty (same rules as at start), or the fleet would have no shared configuration at all.
// after is the clock's timer (time.After in the binary).
func seedWhenReachable(ctx context.Context, st store.ConfigStore, kind string, cfg *configv1.Config, overwrite bool,
	after func(time.Duration) <-chan time.Time, log *slog.Logger) {
	backoff := seedMinBackoff
	for {
		select {
		case <-ctx.Done():
			return
		case <-after(backoff):
		}
		err := seed(ctx, st, kind, cfg, overwrite, log)
		if err == nil {
			log.Info("configuration store reachable again; start-up seeding done")
			return
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, store.ErrUnavailable) {
			// The store reports the outage itself, rate limited.
			log.Debug("configuration store still unavailable; seeding later", "err", err, "retry_in", backoff)
		} else {
			log.Warn("seeding the configuration store failed; retrying", "err", err, "retry_in", backoff)
		}
		backoff = min(2*backoff, seedMaxBackoff)
	}
}
