package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is a redis-server process a test controls: it can be stopped and restarted on the
// same port, or paused to look hung. It is killed when the test ends.
type Server struct {
	tb    testing.TB
	bin   string
	dir   string
	port  int
	extra []string // more redis-server arguments, kept across Restart

	mu   sync.Mutex
	proc *process
}

// Start starts a redis-server for tb alone, or skips tb when redis-server is not on PATH
// (a server started elsewhere cannot be stopped and restarted by the test).
func Start(tb testing.TB) *Server {
	tb.Helper()
	return StartWith(tb)
}

// StartWith is Start with more redis-server arguments (a TLS port, say). The plain port
// stays on: it is how the helper sees the server answer.
func StartWith(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	bin, err := findRedisServer()
	if err != nil {
		skipOrFail(tb, "SKIPPING: this test controls its own Redis and needs redis-server on PATH: "+err.Error())
	}
	dir := tb.TempDir()
	p, err := startProcess(bin, 0, dir, extra...)
	if err != nil {
		tb.Fatalf("start redis-server: %v", err)
	}
	s := &Server{tb: tb, bin: bin, dir: dir, port: p.port, extra: extra, proc: p}
	tb.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.proc != nil {
			s.proc.kill()
			s.proc = nil
		}
	})
	return s
}

// Addr is host:port; it stays the same across Restart.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Stop shuts the server down with SHUTDOWN SAVE, so Restart finds the data again (like a
// production Redis with persistence), and waits until the process has exited.
func (s *Server) Stop() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	if err := s.proc.shutdownSave(); err != nil {
		s.tb.Fatalf("stop redis-server: %v", err)
	}
	s.proc = nil
}

// Crash kills the server (SIGKILL, no save) and removes any dump it left, so Restart comes
// back empty on the same port: a production Redis without persistence that restarted, which
// loses every key.
func (s *Server) Crash() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	s.proc.kill()
	s.proc = nil
	if err := os.Remove(filepath.Join(s.dir, "dump.rdb")); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.tb.Fatalf("remove the dump of redis-server: %v", err)
	}
}

// Restart starts the server again on the same port and directory and waits for PING.
func (s *Server) Restart() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.tb.Fatal("Restart of a running redis-server")
	}
	p, err := startProcess(s.bin, s.port, s.dir, s.extra...)
	if err != nil {
		s.tb.Fatalf("restart redis-server: %v", err)
	}
	s.proc = p
}

// Pause freezes the server (SIGSTOP): connections stay open but nothing answers, the way a
// hung or overloaded Redis looks to clients. Resume undoes it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		s.tb.Fatal("signal to a stopped redis-server")
	}
	if err := s.proc.cmd.Process.Signal(sig); err != nil {
		s.tb.Fatalf("signal redis-server: %v", err)
	}
}

// process is one running redis-server.
type process struct {
	cmd  *exec.Cmd
	port int
	dir  string
	temp bool // dir was created for this process and is removed with it
	done chan struct{}
}

func (p *process) addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

func findRedisServer() (string, error) {
	return exec.LookPath("redis-server")
}

// startProcess starts redis-server on port (0: a free one) with dir as its working
// directory (""; a temporary one), without persistence, and waits until it answers PING.
func startProcess(bin string, port int, dir string, extra ...string) (*process, error) {
	temp := false
	if dir == "" {
		d, err := os.MkdirTemp("", "redistest-")
		if err != nil {
			return nil, fmt.Errorf("temp dir: %w", err)
		}
		dir, temp = d, true
	}
	var lastErr error
	for range 3 { // a free port can be taken between probing and binding: try again
		p := port
		if p == 0 {
			var err error
			if p, err = freePort(); err != nil {
				return nil, err
			}
		}
		proc, err := launch(bin, p, dir, extra...)
		if err == nil {
			proc.temp = temp
			return proc, nil
		}
		lastErr = err
		if port != 0 {
			break
		}
	}
	if temp {
		_ = os.RemoveAll(dir)
	}
	return nil, lastErr
}

func launch(bin string, port int, dir string, extra ...string) (*process, error) {
	cmd := exec.Command(bin, append([]string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", "redis.log", "--daemonize", "no"}, extra...)...)
	return run(cmd, port, dir)
}

// run starts cmd (a redis-server listening on port) in dir and waits until it answers PING.
func run(cmd *exec.Cmd, port int, dir string) (*process, error) {
	cmd.Dir = dir
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("exec %s: %w", cmd.Path, err)
	}
	p := &process{cmd: cmd, port: port, dir: dir, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := ping(p.addr())
		if err == nil {
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("redis-server exited at start: %s", p.logTail())
		default:
		}
		if time.Now().After(deadline) {
			p.kill()
			return nil, fmt.Errorf("redis-server not answering PING after 10s: %w; log: %s", err, p.logTail())
		}
		time.Sleep(10 * time.Millisecond) // waiting for an external process; no condition to poll but PING
	}
}

func (p *process) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a paused server cannot die otherwise
	_ = p.cmd.Process.Kill()
	<-p.done
	if p.temp {
		_ = os.RemoveAll(p.dir)
	}
}

func (p *process) shutdownSave() error {
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	if _, err := command(p.addr(), "SHUTDOWN SAVE"); err != nil && !errors.Is(err, errClosed) {
		p.kill()
		return fmt.Errorf("SHUTDOWN SAVE: %w", err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		p.kill()
		return errors.New("redis-server did not exit within 10s of SHUTDOWN")
	}
}

func (p *process) logTail() string {
	b, err := os.ReadFile(filepath.Join(p.dir, "redis.log"))
	if err != nil {
		return "(no log)"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var errClosed = errors.New("connection closed without a reply")

// command sends one inline command and returns the first reply line; for a bulk string
// reply ("$<n>"), the string itself.
func command(addr, line string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(line + "\r\n")); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	reply, err := r.ReadString('\n')
	if err != nil {
		if reply == "" {
			return "", errClosed
		}
		return "", err
	}
	reply = strings.TrimSpace(reply)
	if n, err := strconv.Atoi(strings.TrimPrefix(reply, "$")); err == nil && strings.HasPrefix(reply, "$") && n >= 0 {
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", fmt.Errorf("reading a bulk reply: %w", err)
		}
		return string(b[:n]), nil
	}
	return reply, nil
}

func ping(addr string) error {
	reply, err := command(addr, "PING")
	if err != nil {
		return err
	}
	if reply != "+PONG" {
		return fmt.Errorf("PING answered %q", reply)
	}
	return nil
}
