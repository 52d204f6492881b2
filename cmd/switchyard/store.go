package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/admin"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

// storeFlags select and configure the shared store.
type storeFlags struct {
	kind       string // memory | redis
	redisAddrs string // comma-separated
	masterName string // Sentinel
	prefix     string
	db         int
}

// openedStore is the store in use plus what the binary reports about it.
type openedStore struct {
	store.Store
	name  string
	check func(context.Context) admin.Readiness
}

// openStore builds the store. With Redis it routes on the Resilient wrapper, so requests keep
// routing on local state while Redis is unreachable (docs/redis.md, "Degradation").
func openStore(f storeFlags, password string, reg prometheus.Registerer, log *slog.Logger) (*openedStore, error) {
	switch f.kind {
	case "memory":
		return &openedStore{Store: memstore.New(), name: "memory"}, nil
	case "redis":
		if f.redisAddrs == "" {
			return nil, errors.New("-store redis needs -redis-addrs")
		}
		rdb := redisstore.NewClient(&redis.UniversalOptions{
			Addrs:      strings.Split(f.redisAddrs, ","),
			MasterName: f.masterName,
			Password:   password,
			DB:         f.db,
		})
		remote, err := redisstore.New(rdb, redisstore.WithPrefix(f.prefix), redisstore.WithLogger(log))
		if err != nil {
			_ = rdb.Close()
			return nil, err
		}
		res, err := redisstore.NewResilient(remote, redisstore.ResilientConfig{Registerer: reg, Logger: log})
		if err != nil {
			_ = remote.Close()
			return nil, err
		}
		check := func(context.Context) admin.Readiness {
			st := res.Status()
			r := admin.Readiness{Name: "store", Ready: true, Detail: "redis"}
			if st.Degraded {
				// Still ready: every replica degrades together when Redis goes away, and
				// failing readiness would take the whole fleet out of its load balancer while
				// it can still route on local state.
				r.Detail = fmt.Sprintf("redis unreachable since %s, routing on local state: %s", st.Since.UTC().Format("2006-01-02T15:04:05Z"), st.LastError)
			}
			return r
		}
		return &openedStore{Store: res, name: "redis", check: check}, nil
	default:
		return nil, fmt.Errorf("-store: unknown store %q (memory or redis)", f.kind)
	}
}

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
