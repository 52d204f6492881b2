package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// SentinelMaster is the master name SharedSentinel's Sentinel monitors.
const SentinelMaster = "mymaster"

// SharedSentinel is one real Sentinel setup for a whole test binary: a redis-server master
// and one `redis-server --sentinel` monitoring it as SentinelMaster (quorum 1), on free
// loopback ports. Clients connect through the Sentinel, which tells them the master. Declare
// it next to TestMain and Close it there, like Shared.
type SharedSentinel struct {
	once      sync.Once
	sentinels []string
	skip      string
	stop      func()
}

// Addrs returns the Sentinel addresses, starting the setup on first use, or skips tb when
// redis-server is not on PATH (fails it under CI).
func (s *SharedSentinel) Addrs(tb testing.TB) []string {
	tb.Helper()
	s.once.Do(s.start)
	if s.skip != "" {
		skipOrFail(tb, s.skip)
	}
	return s.sentinels
}

// Close stops the processes.
func (s *SharedSentinel) Close() {
	if s.stop != nil {
		s.stop()
	}
}

func (s *SharedSentinel) start() {
	bin, err := findRedisServer()
	if err != nil {
		s.skip = "SKIPPING REDIS SENTINEL TESTS: no redis-server on PATH: " + err.Error()
		return
	}
	master, err := startProcess(bin, 0, "")
	if err != nil {
		s.skip = "SKIPPING REDIS SENTINEL TESTS: the master did not start: " + err.Error()
		return
	}
	sentinel, err := startSentinel(bin, master.port)
	if err != nil {
		master.kill()
		s.skip = "SKIPPING REDIS SENTINEL TESTS: the sentinel did not start: " + err.Error()
		return
	}
	s.sentinels = []string{sentinel.addr()}
	s.stop = func() { killAll([]*process{sentinel, master}) }
}

// startSentinel starts a Sentinel monitoring the master on masterPort and waits until it
// names that master.
func startSentinel(bin string, masterPort int) (*process, error) {
	dir, err := os.MkdirTemp("", "redistest-sentinel-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			lastErr = err
			continue
		}
		// Sentinel rewrites its configuration file, so it gets one of its own.
		conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile redis.log\n"+
			"sentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %s 5000\n",
			port, dir, SentinelMaster, masterPort, SentinelMaster)
		path := filepath.Join(dir, "sentinel.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			lastErr = err
			break
		}
		p, err := run(exec.Command(bin, path, "--sentinel"), port, dir)
		if err != nil {
			lastErr = err
			continue
		}
		p.temp = true
		deadline := time.Now().Add(10 * time.Second)
		for {
			reply, err := command(p.addr(), "SENTINEL get-master-addr-by-name "+SentinelMaster)
			if err == nil && strings.HasPrefix(reply, "*2") {
				return p, nil
			}
			if time.Now().After(deadline) {
				p.kill()
				return nil, fmt.Errorf("sentinel does not name %s after 10s: %q %v", SentinelMaster, reply, err)
			}
			time.Sleep(10 * time.Millisecond) // waiting for an external process
		}
	}
	_ = os.RemoveAll(dir)
	return nil, lastErr
}
