// Package deploy_test checks that docker-compose.yml, its switchyard configuration and
// envoy/envoy-compose.yaml agree: without Docker here, these are the mistakes a user would
// otherwise meet first (a fake on another port, a key the fake refuses, Envoy dialling a
// port switchyard does not listen on).
package deploy_test

import (
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim"
	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/routing/config"
)

type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
	} `yaml:"services"`
}

// flagValue returns the value of -name=value in a compose command.
func flagValue(cmd []string, name string) string {
	for _, a := range cmd {
		if v, ok := strings.CutPrefix(a, "-"+name+"="); ok {
			return v
		}
	}
	return ""
}

// mountedAt returns the host path mounted at target.
func mountedAt(t *testing.T, volumes []string, target string) string {
	t.Helper()
	for _, v := range volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == target {
			return strings.TrimPrefix(parts[0], "./")
		}
	}
	t.Fatalf("nothing mounted at %s in %v", target, volumes)
	return ""
}

func port(t *testing.T, hostport string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestComposeAgreesWithItsConfiguration(t *testing.T) {
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(raw, &cf); err != nil {
		t.Fatal(err)
	}
	sy, ok := cf.Services["switchyard"]
	if !ok {
		t.Fatal("no switchyard service")
	}
	if err := os.Chdir(".."); err != nil {
		t.Fatal(err)
	}

	// The configuration is valid and every deployment reaches a fake that accepts its key.
	v, err := config.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadFile(mountedAt(t, sy.Volumes, flagValue(sy.Command, "config")), v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.CompileFile(cfg); err != nil {
		t.Fatal(err)
	}
	for _, d := range cfg.GetDeployments() {
		u, err := url.Parse(d.GetBaseUrl())
		if err != nil {
			t.Fatal(err)
		}
		fake, ok := cf.Services[u.Hostname()]
		if !ok {
			t.Errorf("deployment %s: no compose service %q", d.GetId(), u.Hostname())
			continue
		}
		if got := port(t, flagValue(fake.Command, "listen")); got != u.Port() {
			t.Errorf("deployment %s: fake listens on %s, baseUrl has %s", d.GetId(), got, u.Port())
		}
		if got := flagValue(fake.Command, "api-key"); got != d.GetApiKey() {
			t.Errorf("deployment %s: fake accepts %q, deployment holds %q", d.GetId(), got, d.GetApiKey())
		}
		if got := flagValue(fake.Command, "kind"); !strings.HasPrefix(d.GetProvider(), got) {
			t.Errorf("deployment %s: provider %s served by a %s fake", d.GetId(), d.GetProvider(), got)
		}
	}

	// Replicas share valid state keys (a redis store refuses to start without them).
	if _, err := attemptstate.LoadKeys(func(k string) (string, bool) { s, ok := sy.Environment[k]; return s, ok }, ""); err != nil {
		t.Fatal(err)
	}
	if flagValue(sy.Command, "store") != "redis" || !strings.HasPrefix(flagValue(sy.Command, "redis-addrs"), "redis:") {
		t.Errorf("switchyard does not use the redis service: %v", sy.Command)
	}
	if h, _, _ := net.SplitHostPort(flagValue(sy.Command, "trampoline-advertise")); h != "switchyard" {
		t.Errorf("-trampoline-advertise %q: Envoy reaches switchyard by its service name", flagValue(sy.Command, "trampoline-advertise"))
	}
	if port(t, flagValue(sy.Command, "trampoline-advertise")) != port(t, flagValue(sy.Command, "trampoline-listen")) {
		t.Error("-trampoline-advertise and -trampoline-listen ports differ")
	}

	// Envoy's bootstrap dials the ports switchyard listens on.
	envoy := cf.Services["envoy"]
	if !strings.HasPrefix(envoy.Image, "envoyproxy/envoy:v1.3") {
		t.Errorf("envoy image %q: want the official envoyproxy/envoy >= v1.37", envoy.Image)
	}
	bs, err := sim.LoadFile(mountedAt(t, envoy.Volumes, "/etc/envoy/envoy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"switchyard_extproc": port(t, flagValue(sy.Command, "extproc-listen")),
		"switchyard_xds":     port(t, flagValue(sy.Command, "xds-listen")),
	}
	for _, c := range bs.GetStaticResources().GetClusters() {
		p, ok := want[c.GetName()]
		if !ok {
			continue
		}
		delete(want, c.GetName())
		sa := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
		if sa.GetAddress() != "switchyard" || sa.GetPortValue() == 0 || p != strconv.FormatUint(uint64(sa.GetPortValue()), 10) {
			t.Errorf("cluster %s dials %s:%d, switchyard listens on :%s", c.GetName(), sa.GetAddress(), sa.GetPortValue(), p)
		}
	}
	if len(want) > 0 {
		t.Errorf("bootstrap lacks clusters %v", want)
	}
}
