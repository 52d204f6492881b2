package config

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
)

// The YAML form of the example configuration decodes to the same configuration as its JSON
// form, by extension and by sniffing.
func TestParseFileYAMLMatchesJSON(t *testing.T) {
	data, err := os.ReadFile("../../examples/switchyard.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := ParseJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	y, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"c.yaml", "c.yml", "config"} {
		got, err := ParseFile(name, y)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("%s: YAML decodes to %v, want %v", name, got, want)
		}
	}
	if got, err := ParseFile("config", data); err != nil || !proto.Equal(got, want) {
		t.Fatalf("sniffed JSON: %v", err)
	}
}

func TestParseYAMLRefusesUnknownFieldsAndBadKeys(t *testing.T) {
	for yml, want := range map[string]string{
		"routerSettings:\n  routingStrategy: latency-based-routing\n  routingStratgy: x\n": "routingStratgy",
		"deployments:\n  - 1: x\n": "deployments[0]",
		"deployments: [\n":         "decoding configuration",
	} {
		_, err := ParseFile("c.yaml", []byte(yml))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one naming %s", yml, err, want)
		}
	}
}
