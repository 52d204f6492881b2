package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"google.golang.org/protobuf/encoding/protojson"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
)

// ParseJSON decodes a configuration in its JSON form. Unknown fields are errors: a typo in a
// field name must not silently fall back to a default.
func ParseJSON(data []byte) (*configv1.Config, error) {
	cfg := &configv1.Config{}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(data, cfg); err != nil {
		return nil, fmt.Errorf("decoding configuration: %w", err)
	}
	return cfg, nil
}

// LoadFile reads, decodes (JSON or YAML, ParseFile) and validates a configuration file.
func LoadFile(path string, v *Validator) (*configv1.Config, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseFile(path, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := v.Config(cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ReadFile reads a configuration file; a missing one is an error saying "not found".
func ReadFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("configuration file %s: not found", path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading configuration: %w", err)
	}
	return data, nil
}

// CompileFile compiles a configuration file on its own, at version 0, with the API keys it
// carries inline: what a replica routes on when its shared store cannot be read at start.
// (A store keeps keys apart from deployments, so Compile takes them as a separate map.)
func CompileFile(cfg *configv1.Config) (*Snapshot, error) {
	secrets := make(map[string]string, len(cfg.GetDeployments()))
	for _, d := range cfg.GetDeployments() {
		if k := d.GetApiKey(); k != "" {
			secrets[d.GetId()] = k
		}
	}
	return Compile(0, cfg, secrets)
}
