//go:build realenvoy

package realenvoy_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// envoyImage is the official image the suite runs; SWITCHYARD_ENVOY_IMAGE overrides it
// (for example envoyproxy/envoy:v1.38-latest).
const envoyImage = "envoyproxy/envoy:v1.37-latest"

// The scenarios of e2e/gateway that exercise Envoy's own machinery: cluster_header routing
// from xDS-published clusters, the attempt role as an upstream filter, the 307 internal
// redirect with the sealed state, the retry onto the trampoline priority, and a streamed
// answer through FULL_DUPLEX_STREAMED. One Envoy serves them all (price-based routing: the
// cheaper deployment of each model first).
func TestRealEnvoy(t *testing.T) {
	requireDocker(t)
	runScenarios(t, realEnvoy{})
}

// dockerAnswers reports whether a Docker engine answers, with the reason when not.
// testcontainers panics on some broken setups; that is "no Docker" too.
func dockerAnswers() (reason string) {
	defer func() {
		if r := recover(); r != nil {
			reason = fmt.Sprintf("docker: %v", r)
		}
	}()
	p, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return fmt.Sprintf("no Docker provider: %v", err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Health(ctx); err != nil {
		return fmt.Sprintf("Docker engine not answering: %v", err)
	}
	return ""
}

var docker struct {
	once   sync.Once
	reason string
}

func requireDocker(t *testing.T) {
	t.Helper()
	docker.once.Do(func() { docker.reason = dockerAnswers() })
	if docker.reason != "" {
		// Asked for with the realenvoy tag: a missing engine is a failure, never a skip.
		t.Fatalf("the real-Envoy suite needs a Docker engine: %s", docker.reason)
	}
}

// realEnvoy runs envoyproxy/envoy with testcontainers-go.
type realEnvoy struct{}

func (realEnvoy) host() string { return testcontainers.HostInternal }

func (realEnvoy) start(t *testing.T, bootstrap []byte, forwarded []int, _ []string, _ *slog.Logger) string {
	t.Helper()
	image := envoyImage
	if s := os.Getenv("SWITCHYARD_ENVOY_IMAGE"); s != "" {
		image = s
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer scancel()
	c, err := testcontainers.Run(sctx, image,
		testcontainers.WithFiles(testcontainers.ContainerFile{
			Reader: strings.NewReader(string(bootstrap)), ContainerFilePath: "/etc/envoy/switchyard.json", FileMode: 0o644,
		}),
		testcontainers.WithCmd("envoy", "-c", "/etc/envoy/switchyard.json", "--log-level", "info"),
		testcontainers.WithExposedPorts("10000/tcp"),
		testcontainers.WithHostPortAccess(forwarded...),
		// The listener opens once RDS and CDS from switchyard are in.
		testcontainers.WithWaitStrategy(wait.ForListeningPort("10000/tcp").WithStartupTimeout(2*time.Minute)),
	)
	if c != nil {
		t.Cleanup(func() {
			if t.Failed() {
				dumpLogs(t, c)
			}
			_ = testcontainers.TerminateContainer(c)
		})
	}
	if err != nil {
		t.Fatalf("starting %s: %v", image, err)
	}
	base, err := c.PortEndpoint(sctx, "10000/tcp", "http")
	if err != nil {
		t.Fatal(err)
	}
	return base
}

func dumpLogs(t *testing.T, c testcontainers.Container) {
	t.Helper()
	r, err := c.Logs(context.Background())
	if err != nil {
		t.Logf("envoy logs: %v", err)
		return
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	t.Logf("envoy logs:\n%s", b)
}
