// Command demo runs the whole switchyard gateway on loopback with nothing but Go installed
// (`make demo`): fake OpenAI, Azure OpenAI and Anthropic providers (e2e/fakeprovider),
// switchyard on the memory store (the real binary, built and run as a child process)
// seeded from examples/demo.json, and envoysim playing the shipped envoy/envoy.yaml, which
// takes its deployment clusters and its route from switchyard's xDS server. It prints the
// requests and admin calls to try, and stops everything on SIGINT/SIGTERM.
//
// The gateway takes requests without a client key: the demo trusts loopback explicitly, and
// binds every listener to 127.0.0.1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// masterKey is the admin API's key in the demo; it reaches switchyard through the
// environment, never a flag (behaviour §11).
const masterKey = "demo-master-key"

// flags are the demo's listen addresses (port 0: a free port) and files.
type flags struct {
	config, envoy, switchyard, logFile string
	gateway, envoyAdmin                string
	extproc, trampoline, xds, admin    string
	operator                           string
	openai, azure, anthropic           string
	startTimeout                       time.Duration
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "examples/demo.json", "switchyard configuration; each deployment's baseUrl is replaced by its provider's fake")
	fs.StringVar(&f.envoy, "envoy-config", "envoy/envoy.yaml", "Envoy bootstrap envoysim plays")
	fs.StringVar(&f.switchyard, "switchyard", "", "switchyard binary (default: built from ./cmd/switchyard with the go command)")
	fs.StringVar(&f.logFile, "log-file", "", "file for switchyard's and envoysim's logs (default: in a temporary directory removed on exit)")
	fs.StringVar(&f.gateway, "listen", "127.0.0.1:10000", "the gateway's address (envoy.yaml's ingress listener)")
	fs.StringVar(&f.envoyAdmin, "envoy-admin", "127.0.0.1:9901", "envoysim's admin address (/ready)")
	fs.StringVar(&f.extproc, "extproc-listen", "127.0.0.1:9002", "switchyard's ext_proc gRPC address (envoy.yaml's switchyard_extproc)")
	fs.StringVar(&f.trampoline, "trampoline-listen", "127.0.0.1:9003", "switchyard's trampoline address")
	fs.StringVar(&f.xds, "xds-listen", "127.0.0.1:18000", "switchyard's xDS address (envoy.yaml's switchyard_xds)")
	fs.StringVar(&f.admin, "admin-listen", "127.0.0.1:8080", "switchyard's admin API and status view")
	fs.StringVar(&f.operator, "operator-listen", "127.0.0.1:9090", "switchyard's operator endpoints (/healthz, /readyz, /metrics)")
	fs.StringVar(&f.openai, "openai-listen", "127.0.0.1:18101", "the fake OpenAI")
	fs.StringVar(&f.azure, "azure-listen", "127.0.0.1:18102", "the fake Azure OpenAI")
	fs.StringVar(&f.anthropic, "anthropic-listen", "127.0.0.1:18103", "the fake Anthropic")
	fs.DurationVar(&f.startTimeout, "start-timeout", 3*time.Minute, "how long building and starting may take")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return f, nil
}

// run starts the demo and blocks until ctx is done, then stops every part. ready, if not
// nil, receives the running demo's addresses once the gateway routes.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, ready chan<- addrs) (err error) {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "switchyard-demo-")
	if err != nil {
		return fmt.Errorf("temporary directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if f.logFile == "" {
		f.logFile = dir + "/demo.log"
	}
	logs, err := os.Create(f.logFile)
	if err != nil {
		return fmt.Errorf("log file: %w", err)
	}
	defer func() { _ = logs.Close() }()
	log := slog.New(slog.NewTextHandler(logs, nil))

	startCtx, cancel := context.WithTimeout(ctx, f.startTimeout)
	defer cancel()
	fmt.Fprintln(stderr, "demo: starting the fake providers, switchyard and envoysim (logs:", f.logFile+")")

	fakes, err := startFakes(f)
	if err != nil {
		return err
	}
	defer fakes.close()

	cfgPath, err := writeConfig(f.config, dir, fakes.baseURLs())
	if err != nil {
		return err
	}
	sy, err := startSwitchyard(startCtx, f, cfgPath, dir, logs)
	if err != nil {
		return err
	}
	defer func() {
		if serr := sy.stop(); serr != nil && err == nil {
			err = serr
		}
	}()

	gw, err := startEnvoy(startCtx, f, sy.addrs, cfgPath, log)
	if err != nil {
		return err
	}
	defer gw.Close()

	a := addrs{Gateway: gw.Addr("ingress"), EnvoyAdmin: gw.AdminAddr(), Switchyard: sy.addrs,
		OpenAI: fakes.addr(openaiFake), Azure: fakes.addr(azureFake), Anthropic: fakes.addr(anthropicFake),
		MasterKey: masterKey, LogFile: f.logFile}
	if err := printInstructions(stdout, a); err != nil {
		return err
	}
	if ready != nil {
		ready <- a
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(stderr, "demo: stopping")
		return nil
	case <-sy.exited:
		if ctx.Err() != nil { // Ctrl-C reached switchyard too: it is in our process group
			return nil
		}
		return errors.New("switchyard exited: " + sy.tail())
	}
}
