package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/switchyard-gw/switchyard/extproc"
	"github.com/switchyard-gw/switchyard/internal/contract"
	"github.com/switchyard-gw/switchyard/routing/config"
)

// errInvalid ends `switchyard validate` with exit status 1 once the errors are printed.
var errInvalid = errors.New("invalid configuration")

// validate is `switchyard validate -config f`: it decodes, validates and compiles the file
// as a start would, and checks it against the redirect budget. It prints "ok", or one line
// per error naming the field (deployments[2].weight: ...): every error of the file, those
// of the elements that do decode next to those that do not, and fallback chains or policies
// naming a model no deployment serves (config.CheckFile); then it fails.
func validate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("switchyard validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage:\n  switchyard validate -config FILE    check a configuration file and exit\n\nFlags:\n")
		fs.PrintDefaults()
	}
	path := fs.String("config", "", "path of the configuration file, JSON or YAML (required)")
	maxRedirects := fs.Int("max-internal-redirects", contract.DefaultMaxRedirects, "the Envoy route's max_internal_redirects; every maxAttempts must fit in it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" || fs.NArg() > 0 {
		return errors.New("usage: switchyard validate -config FILE")
	}
	v, err := config.NewValidator()
	if err != nil {
		return err
	}
	err = check(*path, v, *maxRedirects)
	var ve *config.ValidationError
	switch {
	case errors.As(err, &ve):
		for _, fe := range ve.Errors {
			fmt.Fprintln(stdout, fe.String())
		}
		return fmt.Errorf("%s: %w (%d errors)", *path, errInvalid, len(ve.Errors))
	case err != nil:
		fmt.Fprintln(stdout, err)
		return fmt.Errorf("%s: %w", *path, errInvalid)
	}
	fmt.Fprintln(stdout, "ok")
	return nil
}

func check(path string, v *config.Validator, maxRedirects int) error {
	data, err := config.ReadFile(path)
	if err != nil {
		return err
	}
	cfg, err := config.CheckFile(path, data, v)
	if err != nil {
		return err
	}
	snap, err := config.CompileFile(cfg)
	if err != nil {
		return err
	}
	return extproc.CheckRedirectBudget(snap, maxRedirects)
}
