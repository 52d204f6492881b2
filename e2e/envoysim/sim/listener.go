package sim

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

const typeHCM = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"

// Listener.per_connection_buffer_limit_bytes default (1 MiB): the decoder/encoder
// buffer limit of every stream on the listener.
const defaultBufferLimit = 1 << 20

type listener struct {
	name  string
	addr  string
	codec hcmv3.HttpConnectionManager_CodecType
	hcm   *hcmConfig
	ln    net.Listener
	srv   *http.Server
}

// buildListener compiles a Listener with one filter chain holding the HCM.
func (s *Sim) buildListener(pb *listenerv3.Listener) (*listener, error) {
	sa := pb.GetAddress().GetSocketAddress()
	if sa == nil {
		return nil, errors.New("address: only socket_address is supported")
	}
	if sa.GetProtocol() != corev3.SocketAddress_TCP {
		return nil, errors.New("address: only TCP is supported")
	}
	l := &listener{name: pb.GetName(), addr: net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue())))}
	if a, ok := s.opts.listenerAddrs[l.name]; ok {
		l.addr = a
	}
	if len(pb.GetFilterChains()) != 1 || len(pb.GetFilterChains()[0].GetFilters()) != 1 {
		return nil, errors.New("envoysim supports exactly one filter chain with one network filter (the HTTP connection manager)")
	}
	f := pb.GetFilterChains()[0].GetFilters()[0]
	if typeName(f.GetTypedConfig().GetTypeUrl()) != typeHCM {
		return nil, fmt.Errorf("network filter %q: only %s is supported", f.GetName(), typeHCM)
	}
	msg, err := f.GetTypedConfig().UnmarshalNew()
	if err != nil {
		return nil, err
	}
	limit := defaultBufferLimit
	if v := pb.GetPerConnectionBufferLimitBytes(); v != nil {
		limit = int(v.GetValue())
	}
	hpb := msg.(*hcmv3.HttpConnectionManager)
	l.codec = hpb.GetCodecType()
	if l.hcm, err = s.buildHCM(hpb, l.name, limit); err != nil {
		return nil, err
	}
	return l, nil
}

// start binds the listener. codec_type AUTO serves HTTP/1.1 and HTTP/2 with prior
// knowledge (h2c), like Envoy's AUTO codec on a plaintext listener.
func (l *listener) start(s *Sim) error {
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return fmt.Errorf("envoysim: listener %q: %w", l.name, err)
	}
	l.ln = ln
	p := new(http.Protocols)
	switch l.codec {
	case hcmv3.HttpConnectionManager_HTTP1:
		p.SetHTTP1(true)
	case hcmv3.HttpConnectionManager_HTTP2:
		p.SetUnencryptedHTTP2(true)
	default:
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true)
	}
	lim := &l.hcm.limits
	l.srv = &http.Server{
		Handler:   l.hcm,
		Protocols: p,
		// common_http_protocol_options.idle_timeout: a connection without active
		// requests is closed (HTTP/2: GOAWAY first); 0 disables it. Before the first
		// request the same bound applies to a connection that sends nothing.
		IdleTimeout:       lim.connIdleTimeout,
		ReadHeaderTimeout: lim.connIdleTimeout,
		// Go's own limit stays above max_request_headers_kb so that the codec check
		// (hcmLimits.codecCheck) answers like Envoy; the slack covers the request line.
		MaxHeaderBytes: lim.maxRequestHeadersKB*1024 + 64*1024,
		ErrorLog:       nil,
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = l.srv.Serve(ln)
	}()
	s.log.Info("listener started", "listener", l.name, "addr", ln.Addr().String())
	return nil
}

func (l *listener) close() {
	if l.srv != nil {
		_ = l.srv.Close()
	}
}
