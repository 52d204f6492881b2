// Command switchyard runs the switchyard LLM routing gateway.
//
// It loads and validates a configuration (JSON or YAML), builds the routing core on the
// embedded in-memory store (or on Redis, shared by many replicas), and serves the ext_proc
// gRPC server Envoy calls (route and attempt roles), the trampoline, the xDS server, the
// operator endpoints (/healthz, /readyz, /metrics) on one listener and the admin API with
// the status view on another. `switchyard validate -config f` only checks a file.
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
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-gw/switchyard/admin"
	"github.com/switchyard-gw/switchyard/extproc"
	"github.com/switchyard-gw/switchyard/internal/clock"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if len(os.Args) > 1 && os.Args[1] == "validate" {
		err = validate(os.Args[2:], os.Stdout, os.Stderr)
	} else {
		err = run(ctx, os.Args[1:], os.Getenv, os.Stderr, nil)
	}
	if errors.Is(err, flag.ErrHelp) {
		return // -h: the usage went to stderr; asking for it is no failure
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "switchyard:", err)
		os.Exit(1)
	}
}

// usage is -h's text: both forms of the command, then the flags of fs.
func usage(fs *flag.FlagSet) func() {
	return func() {
		fmt.Fprint(fs.Output(), "Usage:\n  switchyard -config FILE [flags]    run the gateway\n"+
			"  switchyard validate -config FILE    check a configuration file and exit\n\nFlags:\n")
		fs.PrintDefaults()
	}
}

// started is what run reports once it serves (for tests).
type started struct {
	addr       string       // the admin listener's address
	operator   string       // the operator listener's address
	extproc    string       // the ext_proc gRPC listener's address
	trampoline string       // the trampoline's address
	xds        string       // the xDS server's address ("" when off)
	live       *config.Live // the configuration in force
}

// run starts switchyard and blocks until ctx is done. ready, if not nil, receives what
// started once the admin listener serves.
// process is what every part of the process shares: the one clock, the metrics registry and
// the logger.
type process struct {
	clock clock.Clock
	reg   prometheus.Registerer
	log   *slog.Logger
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready chan<- started) error {
	fs := flag.NewFlagSet("switchyard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usage(fs)
	configPath := fs.String("config", "", "path of the configuration file, JSON or YAML (required)")
	adminAddr := fs.String("admin-listen", "127.0.0.1:8080", "address of the admin API and the status view (keep it private)")
	operatorAddr := fs.String("operator-listen", ":9090", "address of /healthz, /readyz and /metrics (for kubelet and Prometheus)")
	operatorPprof := fs.Bool("operator-pprof", false, "also serve Go's runtime profiles under /debug/pprof/ on the operator listener (CPU, heap, goroutines; no request content)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	var sf storeFlags
	sf.register(fs)
	var df dataPlaneFlags
	df.register(fs)
	masterKeyFile := fs.String("master-key-file", "", "file holding the master key of the admin API and the status view (else "+admin.MasterKeyEnv+")")
	keyMaxAge := fs.Duration("client-key-max-age", admin.DefaultKeyCacheMaxAge, "with -client-auth keys: how long a verified client key is used "+
		"from this replica's cache before the store is read again; the bound within which a revoked key stops working on a replica that missed "+
		"the revocation's announcement (while the store is unreachable, cached keys keep working)")
	overwrite := fs.Bool("config-overwrite", false, "replace the shared store's configuration with -config even when it already holds one")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *configPath == "" {
		return errors.New("-config is required")
	}
	if _, err := df.clientAuthOf(nil); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	// go-redis logs through a process-global; the binary owns the process (see redislog.go).
	redis.SetLogger(redisLogger{log: log})

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
	p := process{clock: clock.System{}, reg: reg, log: log}
	st, err := openStore(sf, redisEnv{password: getenv("SWITCHYARD_REDIS_PASSWORD"),
		sentinelPassword: getenv("SWITCHYARD_REDIS_SENTINEL_PASSWORD")}, p)
	if err != nil {
		return err
	}
	defer st.Close()
	live := &config.Live{}
	seedErr := seed(ctx, st, sf.kind, cfg, *overwrite, log)
	if seedErr != nil {
		// The shared store is unreachable: start on the file, seed the store when it answers
		// (if it is still empty then) and follow it.
		log.Warn("configuration store unavailable; starting on the configuration file", "err", seedErr)
	}
	if err := live.Reload(ctx, st, validator); err != nil {
		snap, cerr := config.CompileFile(cfg) // with the file's own keys
		if cerr != nil {
			return cerr
		}
		log.Warn("loading the configuration from the store failed; routing on the configuration file", "err", err)
		live.Store(snap)
	}
	// The store's background users stop, and are waited for, before the store closes (the
	// deferred Close above runs after this defer), whatever makes run return.
	bg, stopBG := context.WithCancel(ctx)
	var background sync.WaitGroup
	defer func() { stopBG(); background.Wait() }()
	if seedErr != nil {
		background.Go(func() { seedWhenReachable(bg, st, sf.kind, cfg, *overwrite, p.clock.After, log) })
	}
	background.Go(func() { config.Follower{Clock: p.clock, Logger: log}.Run(bg, live, st, validator) })
	router := routing.New(live, st, routing.Options{Clock: p.clock, Logger: log})
	keys, err := stateKeys(df, sf.kind, getenv, log)
	if err != nil {
		return err
	}
	withKeys := df.clientAuth == string(extproc.ClientAuthKeys)
	safety, err := newStoreSafety(st, live, keyCacheOf(withKeys, *keyMaxAge), p)
	if err != nil {
		return err
	}
	background.Go(func() { safety.guard.Run(bg) })
	if withKeys && sf.kind == "memory" {
		log.Warn("client keys are kept in the memory store: they are lost when this process stops, and every client key " +
			"must then be created again; use -store redis to keep them")
	}
	var verifier extproc.KeyVerifier
	if safety.verifier != nil {
		verifier = safety.verifier
	}
	auth, err := df.clientAuthOf(verifier)
	if err != nil {
		return err
	}
	dp, err := startDataPlane(df, keys, auth, router, live, p)
	if err != nil {
		return err
	}
	checks := []func(context.Context) admin.Readiness{safety.check(st)}
	if dp.XDS != nil {
		checks = append(checks, xdsCheck(dp.XDS, live))
	}

	masterKey, err := admin.LoadMasterKey(getenv, *masterKeyFile)
	if err != nil {
		return err
	}
	if masterKey == "" {
		log.Warn("no master key (" + admin.MasterKeyEnv + " or -master-key-file); authenticated endpoints will refuse every request")
	}
	api, err := admin.NewAPI(admin.APIOptions{MasterKey: masterKey, Config: st, Validator: validator, ClientKeys: st,
		Router: router, Gate: safety.guard, Omitted: omittedOf(dp.XDS), Logger: log})
	if err != nil {
		dp.Stop(df.drain)
		return err
	}
	// Two listeners: kubelet and Prometheus reach the operator endpoints without reaching the
	// admin API (every route of which needs the master key anyway).
	adminSrv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	opSrv := &http.Server{Handler: admin.Handler(router, admin.Options{Checks: checks,
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), Profiling: *operatorPprof}), ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", *adminAddr)
	if err != nil {
		dp.Stop(df.drain)
		return fmt.Errorf("admin listener: %w", err)
	}
	opLn, err := net.Listen("tcp", *operatorAddr)
	if err != nil {
		_ = ln.Close()
		dp.Stop(df.drain)
		return fmt.Errorf("operator listener: %w", err)
	}
	snap := live.Load()
	log.Info("switchyard started", "admin", ln.Addr().String(), "operator", opLn.Addr().String(),
		"extproc", dp.ExtProcAddr(), "trampoline", dp.TrampolineAddr(), "xds", dp.XDSAddr(),
		"store", st.name, "client_auth", string(auth.Mode), "config_version", snap.Version,
		"deployments", len(snap.Deployments), "models", len(snap.Groups), "strategy", snap.Settings.Strategy.String())
	if ready != nil {
		ready <- started{addr: ln.Addr().String(), operator: opLn.Addr().String(), extproc: dp.ExtProcAddr(),
			trampoline: dp.TrampolineAddr(), xds: dp.XDSAddr(), live: live}
	}
	errc := make(chan error, 8)
	go func() { errc <- fmt.Errorf("admin server: %w", adminSrv.Serve(ln)) }()
	go func() { errc <- fmt.Errorf("operator server: %w", opSrv.Serve(opLn)) }()
	dp.Serve(ctx, errc)
	select {
	case err := <-errc:
		dp.Stop(df.drain)
		return err
	case <-ctx.Done():
	}
	// Drain the data plane first: Envoy keeps sending the streams of requests in flight.
	dp.Stop(df.drain)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := errors.Join(adminSrv.Shutdown(shutdownCtx), opSrv.Shutdown(shutdownCtx)); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	log.Info("switchyard stopped")
	return nil
}
