// Package gatewaytest assembles a whole gateway on loopback outside a test — fake providers,
// one switchyard replica as the binary builds it (internal/replica; memory store) and
// envoysim playing Envoy from envoy/static-clusters.yaml.tmpl — for the load driver
// (cmd/loaddriver). e2e/gateway's test harness is the richer form (faults per deployment,
// several replicas, Redis, xDS) over the same replica builder.
package gatewaytest

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strconv"
	"text/template"
	"time"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim"
	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/internal/replica"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/store"
	"github.com/switchyard-gw/switchyard/routing/store/memstore"
)

// Options describe the gateway.
type Options struct {
	// Template is the path of envoy/static-clusters.yaml.tmpl.
	Template string
	// Deployments is how many OpenAI deployments of the public model "gpt-4o" (ids d0, d1, …).
	Deployments int
	// Logger receives every component's logs; nil discards them.
	Logger *slog.Logger
}

// Gateway is a running gateway.
type Gateway struct {
	// Base is the client's base URL (http://127.0.0.1:port).
	Base string
	// IDs are the deployments' ids.
	IDs   []string
	Store store.Store

	closers []func()
}

type endpoint struct {
	ID   string
	Host string
	Port int
}

// Start starts the gateway; Close stops it.
func Start(ctx context.Context, o Options) (g *Gateway, err error) {
	g = &Gateway{Store: memstore.New()}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg := &configv1.Config{}
	secrets := map[string]string{}
	var eps []endpoint
	for i := range max(o.Deployments, 1) {
		id := "d" + strconv.Itoa(i)
		key := "sk-provider-" + id
		fake, err := fakeprovider.New(fakeprovider.Options{Kind: fakeprovider.OpenAI, Name: id, APIKey: key})
		if err != nil {
			return nil, fmt.Errorf("fake provider %s: %w", id, err)
		}
		ts := httptest.NewServer(fake)
		g.closers = append(g.closers, func() { fake.Close(); ts.Close() })
		ep, err := endpointOf(id, ts.Listener.Addr().String())
		if err != nil {
			return nil, err
		}
		eps = append(eps, ep)
		w := uint32(1)
		cfg.Deployments = append(cfg.Deployments, &configv1.Deployment{Id: id, PublicModel: "gpt-4o", Provider: "openai",
			BaseUrl: "http://" + ts.Listener.Addr().String(), ProviderModel: "gpt-4o", Weight: &w})
		secrets[id] = key
		g.IDs = append(g.IDs, id)
	}
	validator, err := config.NewValidator()
	if err != nil {
		return nil, err
	}
	if err := validator.Config(cfg); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	snap, err := config.Compile(1, cfg, secrets)
	if err != nil {
		return nil, err
	}
	key := make([]byte, attemptstate.KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	r, err := replica.New(replica.Config{Router: routing.New(config.NewLive(snap), g.Store, routing.Options{Logger: log}),
		Keys: attemptstate.Keys{Current: key}, Logger: log})
	if err != nil {
		return nil, err
	}
	errc := make(chan error, 3)
	r.Serve(ctx, errc)
	g.closers = append(g.closers, func() { r.Stop(2 * time.Second) })
	ext, err := endpointOf("", r.ExtProcAddr())
	if err != nil {
		return nil, err
	}
	te, err := endpointOf("", r.TrampolineAddr())
	if err != nil {
		return nil, err
	}
	tmpl, err := template.ParseFiles(o.Template)
	if err != nil {
		return nil, err
	}
	var yaml bytes.Buffer
	if err := tmpl.Execute(&yaml, map[string]any{
		"ListenPort": 0, "MaxRedirects": contract.DefaultMaxRedirects, "ConnectTimeout": "1s",
		"ExtProc": ext, "AttemptExtProc": ext, "AttemptCluster": "switchyard_extproc", "Trampoline": te, "Deployments": eps,
	}); err != nil {
		return nil, fmt.Errorf("rendering %s: %w", o.Template, err)
	}
	bs, err := sim.Load(yaml.Bytes())
	if err != nil {
		return nil, fmt.Errorf("loading the rendered bootstrap: %w", err)
	}
	s, err := sim.New(bs, sim.WithListenerAddress("ingress", "127.0.0.1:0"), sim.WithLogger(log.With("component", "envoysim")))
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	if err := s.Start(sctx); err != nil {
		cancel()
		return nil, err
	}
	g.closers = append(g.closers, func() { cancel(); s.Close() })
	g.Base = "http://" + s.Addr("ingress")
	return g, nil
}

// InFlight is each deployment's number of attempts in flight.
func (g *Gateway) InFlight(ctx context.Context) (map[string]int64, error) {
	refs := make([]store.DeploymentRef, len(g.IDs))
	for i, id := range g.IDs {
		refs[i] = store.DeploymentRef{ID: id, Domain: store.DomainOf(id, "")}
	}
	out := make([]store.DeploymentState, len(refs))
	if err := g.Store.ReadStates(ctx, time.Now(), refs, out); err != nil {
		return nil, fmt.Errorf("reading the deployments' states: %w", err)
	}
	m := map[string]int64{}
	for i, s := range out {
		m[g.IDs[i]] = s.Metrics.InFlight
	}
	return m, nil
}

// Close stops everything, last started first.
func (g *Gateway) Close() {
	for i := len(g.closers) - 1; i >= 0; i-- {
		g.closers[i]()
	}
	g.closers = nil
}

func endpointOf(id, addr string) (endpoint, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return endpoint{}, err
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return endpoint{}, fmt.Errorf("port of %s: %w", addr, err)
	}
	return endpoint{ID: id, Host: h, Port: n}, nil
}
