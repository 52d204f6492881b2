// Package redistest gives tests a real Redis (docs/design.md, "Testing"): the server named by
// REDIS_ADDR, else a redis-server from PATH started on a free port, else a redis:7 container
// through testcontainers-go when a Docker daemon answers, else the test is skipped with a
// loud reason. It owns nothing else; CI installs or starts Redis so these tests never skip
// there.
//
// Two shapes:
//   - Shared: one server per test binary, started on first use and stopped from TestMain.
//     Tests isolate themselves with a key prefix (Prefix) instead of a server each.
//   - Start: a server the test controls (Stop, Restart on the same port, Pause, Resume), for
//     fault tests. It always needs redis-server on PATH.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Shared is one Redis for a whole test binary. Declare it next to TestMain and close it
// there:
//
//	var redisServer redistest.Shared
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		redisServer.Close()
//		os.Exit(code)
//	}
type Shared struct {
	once sync.Once
	addr string
	skip string
	stop func()
}

// Addr returns the shared server's address, starting it on first use, or skips tb when no
// Redis can be had.
func (s *Shared) Addr(tb testing.TB) string {
	tb.Helper()
	s.once.Do(s.start)
	if s.skip != "" {
		skipOrFail(tb, s.skip)
	}
	return s.addr
}

// Close stops the server if this package started it.
func (s *Shared) Close() {
	if s.stop != nil {
		s.stop()
	}
}

func (s *Shared) start() {
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		s.addr = addr
		return
	}
	if bin, err := findRedisServer(); err == nil {
		p, err := startProcess(bin, 0, "")
		if err != nil {
			s.skip = "SKIPPING REDIS TESTS: redis-server is on PATH but did not start: " + err.Error()
			return
		}
		s.addr, s.stop = p.addr(), func() { p.kill() }
		return
	}
	addr, stop, err := startContainer()
	if err != nil {
		s.skip = "SKIPPING REDIS TESTS: no REDIS_ADDR, no redis-server on PATH, and no usable Docker (" +
			err.Error() + "). Set REDIS_ADDR or install redis-server to run them."
		return
	}
	s.addr, s.stop = addr, stop
}

// startContainer runs redis:7 with testcontainers-go when a Docker daemon answers.
func startContainer() (addr string, stop func(), err error) {
	defer func() {
		// testcontainers panics on some broken Docker setups; that is "no Docker" here.
		if r := recover(); r != nil {
			err = fmt.Errorf("docker: %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	provider, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return "", nil, fmt.Errorf("docker provider: %w", err)
	}
	hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
	err = provider.Health(hctx)
	hcancel()
	_ = provider.Close()
	if err != nil {
		return "", nil, fmt.Errorf("docker not answering: %w", err)
	}
	c, err := testcontainers.Run(ctx, "redis:7",
		testcontainers.WithCmd("redis-server", "--save", "", "--appendonly", "no"),
		testcontainers.WithExposedPorts("6379/tcp"),
		testcontainers.WithWaitStrategy(wait.ForListeningPort("6379/tcp")),
	)
	if err != nil {
		if c != nil {
			_ = testcontainers.TerminateContainer(c)
		}
		return "", nil, fmt.Errorf("start redis:7 container: %w", err)
	}
	endpoint, err := c.PortEndpoint(ctx, "6379/tcp", "")
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return "", nil, fmt.Errorf("redis container endpoint: %w", err)
	}
	return endpoint, func() { _ = testcontainers.TerminateContainer(c) }, nil
}

// Prefix returns a key prefix unique to tb, so tests can share a server without seeing each
// other's keys. It never contains braces (they would move Redis Cluster hash tags).
func Prefix(tb testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.Map(func(r rune) rune {
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("_./-", r)) {
			return r
		}
		return '_'
	}, tb.Name())
	if len(name) > 48 {
		name = name[len(name)-48:]
	}
	return "sytest:" + name + ":" + hex.EncodeToString(b[:]) + ":"
}
