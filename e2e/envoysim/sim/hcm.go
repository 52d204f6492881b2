package sim

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// hcmConfig is a compiled HttpConnectionManager
// (source/common/http/conn_manager_impl.cc, conn_manager_config.h).
type hcmConfig struct {
	s                 *Sim
	listener          string
	filters           []*httpFilter
	router            *routerConfig
	routes            atomic.Pointer[routeTable]
	rdsName           string
	generateRequestID bool
	serverName        string
	bufferLimit       int
	edge              edgeConfig
	limits            hcmLimits
	localReply        *localReplyConfig
}

// buildHCM compiles the HCM (HttpConnectionManagerConfig): defaults
// generate_request_id true and server_name "envoy".
func (s *Sim) buildHCM(pb *hcmv3.HttpConnectionManager, listener string, bufferLimit int) (*hcmConfig, error) {
	h := &hcmConfig{s: s, listener: listener, generateRequestID: true, serverName: "envoy", bufferLimit: bufferLimit}
	switch pb.GetCodecType() {
	case hcmv3.HttpConnectionManager_AUTO, hcmv3.HttpConnectionManager_HTTP1, hcmv3.HttpConnectionManager_HTTP2:
	default:
		return nil, fmt.Errorf("codec_type %s is not supported by envoysim", pb.GetCodecType())
	}
	var err error
	if h.edge, err = compileEdge(pb); err != nil {
		return nil, err
	}
	if h.limits, err = compileLimits(pb); err != nil {
		return nil, err
	}
	if h.localReply, err = compileLocalReply(pb.GetLocalReplyConfig()); err != nil {
		return nil, err
	}
	if v := pb.GetGenerateRequestId(); v != nil {
		h.generateRequestID = v.GetValue()
	}
	if pb.GetServerName() != "" {
		h.serverName = pb.GetServerName()
	}
	switch rs := pb.GetRouteSpecifier().(type) {
	case *hcmv3.HttpConnectionManager_RouteConfig:
		rt, err := compileRouteTable(rs.RouteConfig)
		if err != nil {
			return nil, fmt.Errorf("route_config: %w", err)
		}
		h.routes.Store(rt)
	case *hcmv3.HttpConnectionManager_Rds:
		if rs.Rds.GetConfigSource().GetAds() == nil {
			return nil, errors.New("rds.config_source: only ads {} is supported by envoysim")
		}
		if s.bs.GetDynamicResources().GetAdsConfig() == nil {
			return nil, errors.New("rds uses ADS but dynamic_resources.ads_config is not set")
		}
		h.rdsName = rs.Rds.GetRouteConfigName()
		s.rds = append(s.rds, h)
	default:
		return nil, fmt.Errorf("route specifier %T is not supported by envoysim", rs)
	}
	if h.filters, err = s.compileHTTPFilters(pb.GetHttpFilters(), false); err != nil {
		return nil, err
	}
	if err := s.checkFilterClusters(h.filters); err != nil {
		return nil, err
	}
	if h.router, err = s.compileRouter(pb.GetHttpFilters()); err != nil {
		return nil, err
	}
	if err := s.checkFilterClusters(h.router.upstreamFilters); err != nil {
		return nil, err
	}
	return h, nil
}

// Hop-by-hop headers the codecs never pass on (HeaderUtility / the HTTP/1 and HTTP/2
// codecs strip connection-specific headers).
var hopByHop = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-connection": true,
	"transfer-encoding": true, "upgrade": true, "http2-settings": true,
}

// requestHeaders builds Envoy's request header map from a Go request: pseudo-headers
// first, lower-cased names (Go loses the client's order, so names are sorted), then
// the HCM's own changes (ConnectionManagerUtility::mutateRequestHeaders, sanitize.go).
func (h *hcmConfig) requestHeaders(r *http.Request) *stream.Headers {
	hd := stream.NewHeaders(
		":authority", r.Host,
		":path", r.RequestURI,
		":method", r.Method,
		":scheme", "http",
	)
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		lk := strings.ToLower(k)
		if hopByHop[lk] || lk == "host" {
			continue
		}
		if lk == "expect" && strings.EqualFold(strings.Join(r.Header[k], ""), "100-continue") {
			// proxy_100_continue is false: the HCM answers 100-continue itself and
			// removes the header (ActiveStream::decodeHeaders).
			continue
		}
		if lk == "te" {
			// Only "te: trailers" survives (HeaderUtility::removeConnectionHeaders).
			for _, v := range r.Header[k] {
				if strings.EqualFold(strings.TrimSpace(v), "trailers") {
					hd.Add("te", "trailers")
				}
			}
			continue
		}
		for _, v := range r.Header[k] {
			hd.Add(lk, v)
		}
	}
	// The codec's limits travel with the map (ext_proc checks mutations against them).
	hd.SetLimits(h.limits.maxHeadersCount, h.limits.maxRequestHeadersKB*1024)
	remote, _ := netip.ParseAddrPort(r.RemoteAddr)
	h.mutateRequestHeaders(hd, remote.Addr())
	if r.ProtoMajor == 1 {
		// The HTTP/1 codec sets no :scheme: it comes from the sanitised
		// x-forwarded-proto when valid (mutateRequestHeaders, getScheme).
		if xfp := hd.Value("x-forwarded-proto"); xfp == "http" || xfp == "https" {
			hd.Set(":scheme", xfp)
		}
	}
	return hd
}

func uuid4() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// ServeHTTP is one downstream request: Envoy's ActiveStream plus its internal
// redirect re-entries (ConnectionManagerImpl::ActiveStream::recreateStream).
func (h *hcmConfig) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if code, details := h.limits.codecCheck(r); code != 0 {
		h.rejectByCodec(w, r, code, details)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(h.s.ctx, cancel)
	defer stop()

	headers := h.requestHeaders(r)
	restoreTrailerHeader(headers, r)
	noBody := r.Body == nil || r.Body == http.NoBody
	req := &requestState{}
	out := &downstreamWriter{w: w, rc: rc, serverName: h.serverName, localReplyConfig: h.localReply}
	st := h.newStream(ctx, headers, req)
	st.chain.In.Push(stream.HeadersFrame(headers, noBody))
	if noBody {
		st.remoteDone.Store(true)
	} else {
		pumped := make(chan struct{})
		go func() {
			defer close(pumped)
			pumpBody(r, &activityBody{ReadCloser: r.Body, st: st, length: r.ContentLength}, st.chain.In, h.limits)
		}()
		defer drainAfterEarlyReply(r, rc, pumped)
	}
	for {
		res := st.run(out)
		h.s.logAccess(h, st, res, out)
		switch {
		case res.redirect != nil:
			// A new stream through the whole filter chain, built from the headers as
			// shipped to the previous upstream, with the buffered body replayed.
			st = h.newStream(ctx, res.redirect.headers, req)
			st.internallyCreated = true
			st.remoteDone.Store(true)
			hasBody := len(res.redirect.body) > 0
			st.chain.In.Push(stream.HeadersFrame(res.redirect.headers, !hasBody))
			if hasBody {
				st.chain.In.Push(stream.DataFrame(res.redirect.body, true))
			}
		case res.reset:
			// After response headers went out a local reply becomes a stream reset
			// (RST_STREAM on HTTP/2; the connection is closed on HTTP/1).
			panic(http.ErrAbortHandler)
		default:
			return
		}
	}
}

// delayedCloseTimeout is the HCM's delayed_close_timeout default (1 s).
const delayedCloseTimeout = time.Second

// drainAfterEarlyReply models Envoy's delayed close on HTTP/1: when the response completes
// before the request (a local reply at request headers, a 413 while the body is still
// arriving), Envoy closes the connection with FlushWriteAndDelay, reading and discarding
// what the client still sends for up to delayed_close_timeout, so the client finishes its
// write and reads the response instead of meeting a reset (conn_manager_impl.cc
// ConnectionManagerImpl::doEndStream and checkForDeferredClose; connection_impl.cc
// ConnectionImpl::close with ConnectionCloseType::FlushWriteAndDelay). Go's server would
// otherwise close a connection with a large unread body at once, and a client still
// writing gets a reset that can swallow the response.
func drainAfterEarlyReply(r *http.Request, rc *http.ResponseController, pumped <-chan struct{}) {
	select {
	case <-pumped:
		return
	default:
	}
	if r.ProtoMajor != 1 {
		return // HTTP/2 resets the stream, not the connection
	}
	_ = rc.Flush()
	_ = rc.SetReadDeadline(time.Now().Add(delayedCloseTimeout))
	<-pumped
}

// pumpBody feeds the request body into the first pass. When the length is known the
// last chunk carries end_stream, as Envoy's codecs deliver it; request trailers end
// the stream instead (decodeTrailers). Go's server keeps only the trailers the client
// declared in a `trailer` header (as Go's client does), so a request that declares
// trailers is read to EOF whatever its length. The trailer map carries the HCM's limits,
// as the server codec gives them (ServerConnectionImpl::allocTrailers in
// source/common/http/http1/codec_impl.h), for ext_proc's mutation checks.
func pumpBody(r *http.Request, body io.Reader, q *stream.Queue[stream.Frame], lim hcmLimits) {
	buf := make([]byte, 32*1024)
	remaining := r.ContentLength
	if r.Trailer != nil {
		remaining = -1
	}
	for {
		n, err := body.Read(buf)
		if n > 0 {
			chunk := append([]byte(nil), buf[:n]...)
			if remaining > 0 {
				remaining -= int64(n)
				if remaining <= 0 {
					q.Push(stream.DataFrame(chunk, true))
					return
				}
			}
			q.Push(stream.DataFrame(chunk, false))
		}
		if errors.Is(err, io.EOF) {
			if t := requestTrailers(r.Trailer); t != nil {
				t.SetLimits(lim.maxHeadersCount, lim.maxRequestHeadersKB*1024)
				q.Push(stream.TrailersFrame(t))
				return
			}
			q.Push(stream.DataFrame(nil, true))
			return
		}
		if err != nil {
			return // downstream reset: the request context is cancelled
		}
	}
}

// requestState is filter state with LifeSpan::Request: it survives internal redirects
// (the num_internal_redirects counter of router.cc).
type requestState struct {
	numInternalRedirects int
}

type redirect struct {
	headers *stream.Headers
	body    []byte
}

type passResult struct {
	redirect   *redirect
	reset      bool
	clientGone bool
}
