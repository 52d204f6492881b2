package redistest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// SharedCluster is one real Redis Cluster (three masters, no replicas) for a whole test
// binary: the nodes named by REDIS_CLUSTER_ADDRS (comma-separated), else three
// `redis-server --cluster-enabled yes` processes on free loopback ports, each in a temporary
// directory of its own, joined with `redis-cli --cluster create`. Declare it next to TestMain
// and Close it there, like Shared. Starting it takes about a second.
type SharedCluster struct {
	once  sync.Once
	addrs []string
	skip  string
	stop  func()
}

// Addrs returns the cluster's node addresses, starting the cluster on first use, or skips tb
// when redis-server or redis-cli is not on PATH (fails it under CI).
func (c *SharedCluster) Addrs(tb testing.TB) []string {
	tb.Helper()
	c.once.Do(c.start)
	if c.skip != "" {
		skipOrFail(tb, c.skip)
	}
	return c.addrs
}

// Close stops the nodes if this package started them.
func (c *SharedCluster) Close() {
	if c.stop != nil {
		c.stop()
	}
}

func (c *SharedCluster) start() {
	if env := os.Getenv("REDIS_CLUSTER_ADDRS"); env != "" {
		c.addrs = strings.Split(env, ",")
		return
	}
	bin, err := findRedisServer()
	if err != nil {
		c.skip = "SKIPPING REDIS CLUSTER TESTS: no REDIS_CLUSTER_ADDRS and no redis-server on PATH: " + err.Error()
		return
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		c.skip = "SKIPPING REDIS CLUSTER TESTS: redis-cli (package redis-tools) is not on PATH: " + err.Error()
		return
	}
	procs, err := startCluster(bin, cli, 3)
	if err != nil {
		c.skip = "SKIPPING REDIS CLUSTER TESTS: the cluster did not start: " + err.Error()
		return
	}
	for _, p := range procs {
		c.addrs = append(c.addrs, p.addr())
	}
	c.stop = func() { killAll(procs) }
}

// startCluster starts n cluster-enabled nodes, assigns the slots among them and waits until
// every node reports cluster_state:ok.
func startCluster(bin, cli string, n int) ([]*process, error) {
	var procs []*process
	for range n {
		p, err := startClusterNode(bin)
		if err != nil {
			killAll(procs)
			return nil, err
		}
		procs = append(procs, p)
	}
	args := []string{"--cluster", "create"}
	for _, p := range procs {
		args = append(args, p.addr())
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		killAll(procs)
		return nil, fmt.Errorf("redis-cli --cluster create: %w: %s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range procs {
		for {
			info, err := command(p.addr(), "CLUSTER INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				killAll(procs)
				return nil, fmt.Errorf("node %s: cluster_state not ok after 30s (%v): %s", p.addr(), err, info)
			}
			time.Sleep(20 * time.Millisecond) // waiting for an external process to converge
		}
	}
	return procs, nil
}

// startClusterNode starts one node in a temporary directory of its own (its nodes.conf) on a
// free port whose cluster bus port (port + 10000) is free too.
func startClusterNode(bin string) (*process, error) {
	dir, err := os.MkdirTemp("", "redistest-cluster-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	var lastErr error
	for range 5 {
		port, err := freeClusterPort()
		if err != nil {
			lastErr = err
			continue
		}
		p, err := launch(bin, port, dir, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000")
		if err == nil {
			p.temp = true
			return p, nil
		}
		lastErr = err
		_ = os.Remove(dir + "/nodes.conf")
	}
	_ = os.RemoveAll(dir)
	return nil, lastErr
}

func freeClusterPort() (int, error) {
	for range 50 {
		p, err := freePort()
		if err != nil {
			return 0, err
		}
		if p+10000 > 65535 {
			continue
		}
		if portFree(p + 10000) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port with a free cluster bus port")
}

// portFree reports whether nothing listens on the loopback port.
func portFree(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// skipOrFail skips tb, except under CI (CI set), where a topology test that cannot run is
// a failure: CI installs what they need, so a skip there would hide a broken setup.
func skipOrFail(tb testing.TB, reason string) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatal(reason)
	}
	tb.Skip(reason)
}

func killAll(procs []*process) {
	for _, p := range procs {
		p.kill()
	}
}
