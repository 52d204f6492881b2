package fakeprovider

import (
	"crypto/tls"
	"net"
	"net/http"
)

// reset drops the connection with a TCP RST: it hijacks the connection, sets SO_LINGER 0
// and closes the raw socket (under TLS too, skipping close_notify), so the client reads
// "connection reset by peer" rather than a clean EOF. HTTP/2 connections cannot be
// hijacked; there the handler aborts, which resets the stream (RST_STREAM).
func (x *exchange) reset() {
	_ = x.flush()
	conn, _, err := http.NewResponseController(x.w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	raw := conn
	if tc, ok := conn.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = raw.Close()
}
