// Package testnet holds the loopback network helpers tests share.
package testnet

import (
	"net"
	"testing"
)

// DeadAddress is a loopback address where nothing listens: a connect there is refused.
func DeadAddress(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
