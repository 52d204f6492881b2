package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
)

// The fakes' names are what the x-fake-fault header's server= picks.
const (
	openaiFake    = "openai"
	azureFake     = "azure"
	anthropicFake = "anthropic"
)

// The keys switchyard holds for the fakes (examples/demo.json); clients never send them.
var fakeKeys = map[string]string{openaiFake: "sk-demo-openai", azureFake: "demo-azure-key", anthropicFake: "sk-ant-demo"}

// fake is one running fake provider.
type fake struct {
	name string
	srv  *fakeprovider.Server
	http *http.Server
	ln   net.Listener
}

type fakes []*fake

// startFakes serves the three fake providers; each answers with a text naming itself, so
// the client sees which provider served.
func startFakes(f flags) (fakes, error) {
	specs := []struct {
		name, addr, text string
		kind             fakeprovider.Kind
	}{
		{openaiFake, f.openai, "Hello from the fake OpenAI.", fakeprovider.OpenAI},
		{azureFake, f.azure, "Hello from the fake Azure OpenAI.", fakeprovider.Azure},
		{anthropicFake, f.anthropic, "Hello from the fake Anthropic.", fakeprovider.Anthropic},
	}
	var out fakes
	for _, s := range specs {
		srv, err := fakeprovider.New(fakeprovider.Options{Kind: s.kind, Name: s.name, APIKey: fakeKeys[s.name],
			Content: fakeprovider.Content{Text: s.text}})
		if err != nil {
			out.close()
			return nil, err
		}
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			out.close()
			return nil, fmt.Errorf("fake %s: %w", s.name, err)
		}
		fk := &fake{name: s.name, srv: srv, ln: ln, http: &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}}
		// Serve returns ErrServerClosed at shutdown; a fake has no other way to fail.
		go func() { _ = fk.http.Serve(ln) }()
		out = append(out, fk)
	}
	return out, nil
}

func (fs fakes) addr(name string) string {
	for _, f := range fs {
		if f.name == name {
			return f.ln.Addr().String()
		}
	}
	return ""
}

// baseURLs maps a configuration's provider kind to the fake serving it.
func (fs fakes) baseURLs() map[string]string {
	return map[string]string{
		"openai":       "http://" + fs.addr(openaiFake),
		"azure-openai": "http://" + fs.addr(azureFake),
		"anthropic":    "http://" + fs.addr(anthropicFake),
	}
}

// close releases stalled handlers first (fakeprovider's Close), then stops serving.
func (fs fakes) close() {
	for _, f := range fs {
		f.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := f.http.Shutdown(ctx); err != nil {
			_ = f.http.Close()
		}
		cancel()
	}
}
