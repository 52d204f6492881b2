package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// switchyardAddrs are the bound addresses switchyard reports in its "switchyard started"
// log line (port 0 flags become real ports there).
type switchyardAddrs struct {
	Admin      string `json:"admin"`
	Operator   string `json:"operator"`
	Extproc    string `json:"extproc"`
	Trampoline string `json:"trampoline"`
	XDS        string `json:"xds"`
}

// child is the running switchyard process.
type child struct {
	cmd    *exec.Cmd
	addrs  switchyardAddrs
	exited chan struct{} // closed when the process has exited
	err    error         // Wait's result, set before exited is closed

	mu   sync.Mutex
	last []string // its last log lines, for error messages
}

// startSwitchyard runs switchyard on the memory store with the demo configuration and
// waits until it serves. Its logs go to logs. The binary is built first unless -switchyard
// names one. The child is signalled by stop, not by ctx: ctx only bounds the start.
func startSwitchyard(ctx context.Context, f flags, cfgPath, dir string, logs io.Writer) (*child, error) {
	bin := f.switchyard
	if bin == "" {
		bin = filepath.Join(dir, "switchyard")
		goCmd, err := exec.LookPath("go")
		if err != nil {
			return nil, fmt.Errorf("building switchyard needs the go command (or -switchyard): %w", err)
		}
		build := exec.CommandContext(ctx, goCmd, "build", "-o", bin, "github.com/switchyard-gw/switchyard/cmd/switchyard")
		build.Stdout, build.Stderr = logs, logs
		if err := build.Run(); err != nil {
			return nil, fmt.Errorf("building switchyard (see the log file): %w", err)
		}
	}
	// The demo trusts loopback explicitly: no client key is needed.
	cmd := exec.Command(bin, "-config", cfgPath, "-store", "memory", "-client-auth", "envoy",
		"-admin-listen", f.admin, "-operator-listen", f.operator, "-operator-pprof", "-extproc-listen", f.extproc, "-trampoline-listen", f.trampoline,
		"-xds-listen", f.xds, "-drain-timeout", "5s")
	// The master key travels in the environment, never in ps.
	cmd.Env = append(os.Environ(), "SWITCHYARD_MASTER_KEY="+masterKey)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting switchyard: %w", err)
	}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	started := make(chan switchyardAddrs, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			_, _ = fmt.Fprintln(logs, line)
			c.remember(line)
			var l struct {
				Msg string `json:"msg"`
				switchyardAddrs
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "switchyard started" {
				started <- l.switchyardAddrs
			}
		}
	}()
	go func() {
		<-copied // Wait closes the pipe: read it to the end first
		c.err = cmd.Wait()
		close(c.exited)
	}()
	select {
	case c.addrs = <-started:
		return c, nil
	case <-c.exited:
		return nil, fmt.Errorf("switchyard exited at start (%v): %s", c.err, c.tail())
	case <-ctx.Done():
		_ = c.stop()
		return nil, fmt.Errorf("waiting for switchyard to start: %w", ctx.Err())
	}
}

func (c *child) remember(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = append(c.last, line)
	if len(c.last) > 5 {
		c.last = c.last[1:]
	}
}

func (c *child) tail() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.last, "\n")
}

// stop sends SIGTERM (switchyard drains and stops its listeners) and waits; a process still
// running after the grace period is killed.
func (c *child) stop() error {
	select {
	case <-c.exited:
		return nil
	default:
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping switchyard: %w", err)
	}
	select {
	case <-c.exited:
		if c.err != nil {
			return fmt.Errorf("switchyard: %w: %s", c.err, c.tail())
		}
		return nil
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return errors.New("switchyard did not stop within 20s; killed")
	}
}
