// Command switchyard runs the switchyard LLM routing gateway.
//
// Today it loads and validates a configuration, builds the routing core on the embedded
// in-memory store (or on Redis, shared by many replicas) and serves the operator endpoints
// (/healthz, /readyz, /metrics and /v1/models/{model}/deployments). The ext_proc and xDS
// servers are wired here as they land.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchyard-gw/switchyard/admin"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store/redisstore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "switchyard:", err)
		os.Exit(1)
	}
}

// run starts switchyard and blocks until ctx is done. ready, if not nil, receives the admin
// listener's address once it serves.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready chan<- string) error {
	fs := flag.NewFlagSet("switchyard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "path of the JSON configuration file (required)")
	adminAddr := fs.String("admin-listen", "127.0.0.1:8080", "address of the operator HTTP endpoints")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	var sf storeFlags
	fs.StringVar(&sf.kind, "store", "memory", "routing state and configuration store: memory (one replica) or redis (many replicas)")
	fs.StringVar(&sf.redisAddrs, "redis-addrs", "", "comma-separated Redis addresses: one for standalone, several for Cluster, the Sentinels with -redis-master-name")
	fs.StringVar(&sf.masterName, "redis-master-name", "", "Sentinel master name")
	fs.StringVar(&sf.prefix, "redis-prefix", redisstore.DefaultPrefix, "prefix of every Redis key (one per gateway fleet)")
	fs.IntVar(&sf.db, "redis-db", 0, "Redis database (standalone and Sentinel only)")
	overwrite := fs.Bool("config-overwrite", false, "replace the shared store's configuration with -config even when it already holds one")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *configPath == "" {
		return errors.New("-config is required")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	validator, err := config.NewValidator()
	if err != nil {
		return err
	}
	cfg, err := config.LoadFile(*configPath, validator)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	st, err := openStore(sf, getenv("SWITCHYARD_REDIS_PASSWORD"), reg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	live := &config.Live{}
	if err := seed(ctx, st, sf.kind, cfg, *overwrite, log); err != nil {
		// The shared store is unreachable: start on the file and follow the store when it
		// answers (the resilient store announces the version on recovery).
		log.Warn("configuration store unavailable; starting on the configuration file", "err", err)
	}
	if err := live.Reload(ctx, st, validator); err != nil {
		snap, cerr := config.Compile(0, cfg, nil)
		if cerr != nil {
			return cerr
		}
		log.Warn("loading the configuration from the store failed; routing on the configuration file", "err", err)
		live.Store(snap)
	}
	go live.Follow(ctx, st, validator, log)
	router := routing.New(live, st, routing.Options{Logger: log})
	var checks []func(context.Context) admin.Readiness
	if st.check != nil {
		checks = append(checks, st.check)
	}

	masterKey := getenv("SWITCHYARD_MASTER_KEY")
	if masterKey == "" {
		log.Warn("SWITCHYARD_MASTER_KEY is not set; authenticated endpoints will refuse every request")
	}
	srv := &http.Server{
		Handler: admin.Handler(router, admin.Options{MasterKey: masterKey, Logger: log, Checks: checks,
			Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	ln, err := net.Listen("tcp", *adminAddr)
	if err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	snap := live.Load()
	log.Info("switchyard started", "admin", ln.Addr().String(), "store", st.name,
		"config_version", snap.Version, "deployments", len(snap.Deployments), "models", len(snap.Groups),
		"strategy", snap.Settings.Strategy.String())
	if ready != nil {
		ready <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("admin server: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	log.Info("switchyard stopped")
	return nil
}
