// Command fakeprovider serves one e2e/fakeprovider fake (OpenAI, Azure OpenAI or Anthropic)
// over plain HTTP until SIGINT or SIGTERM, for docker-compose and for trying switchyard
// without provider accounts:
//
//	go run ./cmd/fakeprovider -kind openai -listen :8081 -api-key sk-fake
//
// Faults are scripted per request with the x-fake-fault header (e2e/fakeprovider/README.md).
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
	"strings"
	"syscall"
	"time"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
)

// apiKeyEnv carries the key the fake accepts when -api-key is not given.
const apiKeyEnv = "FAKEPROVIDER_API_KEY"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "fakeprovider:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends; ready, when set, receives the listening address.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready chan<- string) error {
	fs := flag.NewFlagSet("fakeprovider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kind := fs.String("kind", "openai", "provider dialect: openai, azure or anthropic")
	listen := fs.String("listen", "127.0.0.1:8081", "address to serve on")
	name := fs.String("name", "", "name matched by the x-fake-fault header's server= filter (default: the kind)")
	apiKey := fs.String("api-key", "", "the only key accepted (else "+apiKeyEnv+"; empty in both accepts any key)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	k, err := parseKind(*kind)
	if err != nil {
		return err
	}
	key := *apiKey
	if key == "" {
		key = getenv(apiKeyEnv)
	}
	if *name == "" {
		*name = k.String()
	}
	fake, err := fakeprovider.New(fakeprovider.Options{Kind: k, Name: *name, APIKey: key})
	if err != nil {
		return fmt.Errorf("fake %s: %w", k, err)
	}
	defer fake.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *listen, err)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	srv := &http.Server{Handler: fake, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("fake provider serving", "kind", k.String(), "name", *name, "addr", ln.Addr().String(), "auth", key != "")
	if ready != nil {
		ready <- ln.Addr().String()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

func parseKind(s string) (fakeprovider.Kind, error) {
	for _, k := range []fakeprovider.Kind{fakeprovider.OpenAI, fakeprovider.Azure, fakeprovider.Anthropic} {
		if strings.EqualFold(s, k.String()) {
			return k, nil
		}
	}
	return 0, fmt.Errorf("-kind %q: want openai, azure or anthropic", s)
}
