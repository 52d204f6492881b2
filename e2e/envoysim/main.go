// Command envoysim runs the envoysim stand-in for Envoy from an Envoy bootstrap file
// until SIGINT or SIGTERM:
//
//	go run ./e2e/envoysim -c envoy/envoy.yaml
//
// It accepts the same flags Envoy uses for this (-c/--config-path, -l/--log-level);
// every field of the bootstrap that envoysim does not implement is an error.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "envoysim:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("envoysim", flag.ContinueOnError)
	var configPath, level string
	fs.StringVar(&configPath, "c", "", "path to the Envoy bootstrap (YAML or JSON)")
	fs.StringVar(&configPath, "config-path", "", "path to the Envoy bootstrap (YAML or JSON)")
	fs.StringVar(&level, "l", "info", "log level: debug, info, warn, error")
	fs.StringVar(&level, "log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if configPath == "" {
		return fmt.Errorf("missing -c <bootstrap.yaml>")
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("log level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))

	bs, err := sim.LoadFile(configPath)
	if err != nil {
		return err
	}
	s, err := sim.New(bs, sim.WithLogger(log))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := s.Start(ctx); err != nil {
		return err
	}
	log.Info("envoysim running", "config", configPath)
	<-ctx.Done()
	log.Info("envoysim shutting down")
	s.Close()
	return nil
}
