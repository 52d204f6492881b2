package redistest

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal kills redis-server if the test binary dies without cleaning up, so a
// crashed test run leaves no server behind.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
