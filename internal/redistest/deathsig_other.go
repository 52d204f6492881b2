//go:build !linux

package redistest

import "os/exec"

// setParentDeathSignal: only Linux can tie a child's life to its parent; elsewhere test
// cleanup alone stops the server.
func setParentDeathSignal(*exec.Cmd) {}
