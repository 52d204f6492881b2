package main

import (
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/switchyard-gw/switchyard/extproc"
	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/internal/replica"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
)

// dataPlaneFlags configure the ext_proc gRPC server Envoy calls and the trampoline.
type dataPlaneFlags struct {
	extprocAddr    string
	trampolineAddr string
	// xdsAddr serves ADS; trampolineAdvertise is the trampoline's address as Envoy reaches
	// it (the listener's address when empty).
	xdsAddr, trampolineAdvertise string
	stateKeysFile                string
	maxRedirects                 int
	maxRequestBody               int
	drain                        time.Duration
	clientAuth                   string
	extprocTLS, xdsTLS           grpcTLSFlags
}

func (f *dataPlaneFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.extprocAddr, "extproc-listen", "127.0.0.1:9002", "address of the ext_proc gRPC server (Envoy's switchyard_extproc cluster)")
	fs.StringVar(&f.trampolineAddr, "trampoline-listen", "127.0.0.1:9003", "address of the trampoline (priority 1 of every deployment cluster)")
	fs.StringVar(&f.xdsAddr, "xds-listen", "127.0.0.1:18000", "address of the xDS (ADS) server publishing the deployment clusters and the route; empty: none")
	fs.StringVar(&f.trampolineAdvertise, "trampoline-advertise", "", "host:port at which Envoy reaches the trampoline (default: the -trampoline-listen address)")
	fs.StringVar(&f.stateKeysFile, "state-keys-file", "", "file of the attempt-state keys (base64, current first); else "+attemptstate.StateKeysEnv)
	fs.IntVar(&f.maxRedirects, "max-internal-redirects", contract.DefaultMaxRedirects, "the Envoy route's max_internal_redirects; every maxAttempts must fit in it")
	fs.IntVar(&f.maxRequestBody, "max-request-body", contract.DefaultMaxRequestBody, "largest request body in bytes: bodies above it get the dialect's 413; sizes the ext_proc gRPC message limits, the attempt role's response hold and, over xDS, Envoy's route and cluster buffer limits (the bootstrap listener's per_connection_buffer_limit_bytes must be at least this)")
	fs.DurationVar(&f.drain, "drain-timeout", 30*time.Second, "how long in-flight ext_proc streams may finish on shutdown")
	fs.StringVar(&f.clientAuth, "client-auth", "", "who authenticates clients (required): keys (switchyard checks client API keys made with POST /admin/client-keys) or envoy (an Envoy filter before ext_proc does, e.g. jwt_authn or ext_authz)")
	f.extprocTLS.register(fs, "extproc", "ext_proc gRPC server")
	f.xdsTLS.register(fs, "xds", "xDS server")
}

// errNoClientAuth is why the data plane does not start without -client-auth.
var errNoClientAuth = errors.New("-client-auth is required: switchyard holds provider keys and must not be an open proxy; " +
	"use -client-auth keys to check client API keys (create them with POST /admin/client-keys) " +
	"or -client-auth envoy when Envoy authenticates clients before the ext_proc filter (jwt_authn, ext_authz; see docs/extproc.md)")

// clientAuth is the route role's client access for the flag's mode; keys are checked with
// verifier.
func (f dataPlaneFlags) clientAuthOf(verifier extproc.KeyVerifier) (extproc.ClientAuth, error) {
	if f.clientAuth == "" {
		return extproc.ClientAuth{}, errNoClientAuth
	}
	mode, err := extproc.ParseClientAuthMode(f.clientAuth)
	if err != nil {
		return extproc.ClientAuth{}, fmt.Errorf("-client-auth: %w", err)
	}
	ca := extproc.ClientAuth{Mode: mode}
	if mode == extproc.ClientAuthKeys {
		ca.Verifier = verifier
	}
	return ca, nil
}

// stateKeys loads the keys that seal the attempt state. Replicas must share them; a lone
// replica on the memory store may run on a key of its own, made at startup.
func stateKeys(f dataPlaneFlags, storeKind string, getenv func(string) string, log *slog.Logger) (attemptstate.Keys, error) {
	keys, err := attemptstate.LoadKeys(func(k string) (string, bool) { v := getenv(k); return v, v != "" }, f.stateKeysFile)
	if err == nil {
		return keys, nil
	}
	if f.stateKeysFile != "" || getenv(attemptstate.StateKeysEnv) != "" || storeKind != "memory" {
		return attemptstate.Keys{}, fmt.Errorf("attempt-state keys (replicas sharing a store must share them): %w", err)
	}
	k := make([]byte, attemptstate.KeySize)
	if _, err := rand.Read(k); err != nil {
		return attemptstate.Keys{}, fmt.Errorf("making a state key: %w", err)
	}
	log.Info("no attempt-state keys configured; this single replica uses a key of its own", "env", attemptstate.StateKeysEnv)
	return attemptstate.Keys{Current: k}, nil
}

// startDataPlane builds this process's replica (internal/replica) from the flags.
func startDataPlane(f dataPlaneFlags, keys attemptstate.Keys, auth extproc.ClientAuth, router *routing.Router, live *config.Live, p process) (*replica.Replica, error) {
	extprocCreds, err := f.extprocTLS.serverOptions()
	if err != nil {
		return nil, err
	}
	xdsCreds, err := f.xdsTLS.serverOptions()
	if err != nil {
		return nil, err
	}
	if f.maxRequestBody <= 0 {
		return nil, fmt.Errorf("-max-request-body %d: want a positive number of bytes", f.maxRequestBody)
	}
	ls, err := f.listen()
	if err != nil {
		return nil, err
	}
	return replica.New(replica.Config{Router: router, Live: live, Keys: keys, ClientAuth: auth,
		MaxRedirects: f.maxRedirects, MaxRequestBody: f.maxRequestBody, Clock: p.clock, Logger: p.log, Registry: p.reg,
		Listeners: ls, TrampolineAdvertise: f.trampolineAdvertise, ExtProcGRPC: extprocCreds, XDSGRPC: xdsCreds})
}

// listen opens the data plane's listeners (no xDS one without -xds-listen); on an error
// none stays open.
func (f dataPlaneFlags) listen() (ls replica.Listeners, err error) {
	var opened []net.Listener
	open := func(what, addr string) net.Listener {
		if err != nil || addr == "" {
			return nil
		}
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err != nil {
			err = fmt.Errorf("%s listener: %w", what, err)
			return nil
		}
		opened = append(opened, ln)
		return ln
	}
	ls = replica.Listeners{ExtProc: open("ext_proc", f.extprocAddr), Trampoline: open("trampoline", f.trampolineAddr), XDS: open("xDS", f.xdsAddr)}
	if err != nil {
		for _, ln := range opened {
			_ = ln.Close()
		}
		return replica.Listeners{}, err
	}
	return ls, nil
}
