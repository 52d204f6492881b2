package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
	"github.com/switchyard-gw/switchyard/routing/config"
)

// Issue 16 items 2 and 8: a base URL xds cannot build and a key with a control character
// are refused by Config (files, seeds) and Message (admin writes), naming the field, without
// repeating the URL's credential; Stored (a configuration already in the store) lets them
// through so one stored deployment cannot freeze every later version.
func TestDeploymentEndpointRules(t *testing.T) {
	v := validator(t)
	bad := map[string]func(d *configv1.Deployment){}
	for _, u := range []string{"ftp://x", "file:///etc/passwd", "http://", "http://h:0", "http://h:99999", "http://h:",
		"https://user:hunter2@h", "https://h/#f"} {
		bad["baseUrl "+u] = func(d *configv1.Deployment) { d.BaseUrl = u }
	}
	for _, k := range []string{"sk-hunter2\r\nX: y", "sk-hunter2\n", "sk-\x00hunter2", "sk-hunter2\x7f"} {
		bad["apiKey "+k] = func(d *configv1.Deployment) { d.ApiKey = k }
	}
	for name, breakIt := range bad {
		d := goodDeployment()
		breakIt(d)
		field := strings.Fields(name)[0]
		cfg := &configv1.Config{Deployments: []*configv1.Deployment{d}}
		if got := fieldErrors(t, v.Config(cfg)); got["deployments[0]."+field] == "" {
			t.Errorf("Config with %q: %v, want deployments[0].%s named", name, got, field)
		} else if strings.Contains(got["deployments[0]."+field], "hunter2") {
			t.Errorf("Config with %q: the message repeats the secret: %q", name, got["deployments[0]."+field])
		}
		if got := fieldErrors(t, v.Message("", d)); got[field] == "" {
			t.Errorf("Message with %q: %v, want %s named", name, got, field)
		}
		if err := v.Stored(cfg); err != nil {
			t.Errorf("Stored with %q: %v, want it followed (xds leaves it out)", name, err)
		}
	}
	for _, u := range []string{"http://localhost:8080", "https://x.openai.azure.com/openai", "http://[::1]:9000/v1", "https://h:65535"} {
		d := goodDeployment()
		d.BaseUrl, d.ApiKey = u, "sk-fine key with spaces"
		if err := v.Config(&configv1.Config{Deployments: []*configv1.Deployment{d}}); err != nil {
			t.Errorf("base URL %q refused: %v", u, err)
		}
	}
	// A file with one is refused at load.
	path := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(path, []byte(`{"deployments":[{"id":"d1","publicModel":"m","provider":"openai","baseUrl":"ftp://x","providerModel":"m"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.LoadFile(path, v); err == nil || !strings.Contains(err.Error(), "deployments[0].baseUrl") {
		t.Errorf("LoadFile: %v, want deployments[0].baseUrl refused", err)
	}
}
