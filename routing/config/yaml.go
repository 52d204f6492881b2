package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
)

// ParseFile decodes a configuration file named name: YAML for .yaml and .yml, JSON for
// .json, otherwise JSON when the first non-blank byte opens an object and YAML if not.
// YAML goes through JSON into protojson, so a YAML file has exactly the JSON form's field
// names and rules (unknown fields are errors).
func ParseFile(name string, data []byte) (*configv1.Config, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return ParseJSON(data)
	case ".yaml", ".yml":
		return ParseYAML(data)
	}
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		return ParseJSON(data)
	}
	return ParseYAML(data)
}

// ParseYAML decodes the YAML form of a configuration.
func ParseYAML(data []byte) (*configv1.Config, error) {
	j, err := yamlToJSON(data)
	if err != nil {
		return nil, err
	}
	return ParseJSON(j)
}

// yamlToJSON is a YAML configuration's JSON form.
func yamlToJSON(data []byte) ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("decoding configuration: %w", err)
	}
	if doc == nil {
		doc = map[string]any{}
	}
	doc, err := jsonable(doc, "")
	if err != nil {
		return nil, fmt.Errorf("decoding configuration: %w", err)
	}
	j, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("decoding configuration: %w", err)
	}
	return j, nil
}

// fileJSON is a configuration file's JSON form, chosen as ParseFile chooses.
func fileJSON(name string, data []byte) ([]byte, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return data, nil
	case ".yaml", ".yml":
		return yamlToJSON(data)
	}
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		return data, nil
	}
	return yamlToJSON(data)
}

// jsonable turns yaml.v3's mappings with non-string keys (map[any]any) into JSON objects,
// refusing keys that are not strings.
func jsonable(v any, path string) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			c, err := jsonable(e, path+"."+k)
			if err != nil {
				return nil, err
			}
			t[k] = c
		}
		return t, nil
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("%s: key %v is not a string", strings.TrimPrefix(path, "."), k)
			}
			c, err := jsonable(e, path+"."+ks)
			if err != nil {
				return nil, err
			}
			out[ks] = c
		}
		return out, nil
	case []any:
		for i, e := range t {
			c, err := jsonable(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			t[i] = c
		}
		return t, nil
	}
	return v, nil
}
