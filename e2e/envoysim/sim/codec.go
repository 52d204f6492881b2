package sim

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// codec is the terminal upstream filter (envoy.filters.http.upstream_codec,
// source/common/router/upstream_codec_filter.cc): it sends the request the upstream
// filters produced to the chosen host and feeds the response back through them.
type codec struct {
	u   *upstreamRequest
	in  *stream.Queue[stream.Frame]
	out *stream.Queue[stream.Frame]
}

type dialResult struct {
	conn   net.Conn
	reason resetReason
	detail string
	err    error
}

// dial connects to the host within connect_timeout, TLS handshake included (the
// connection is "connected" after the handshake), choosing SNI and trust from the
// host's transport socket.
func dial(ctx context.Context, h *host) dialResult {
	cctx, cancel := context.WithTimeout(ctx, h.cluster.connectTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(cctx, h.cluster.network, h.address)
	if err != nil {
		return dialFailure(ctx, cctx, err, "")
	}
	if h.tls == nil {
		return dialResult{conn: conn}
	}
	tc := tls.Client(conn, h.tls.cfg)
	if err := tc.HandshakeContext(cctx); err != nil {
		_ = conn.Close()
		return dialFailure(ctx, cctx, err, "TLS_error:"+err.Error())
	}
	return dialResult{conn: tc}
}

var errOverflow = errors.New("circuit breaker overflow")

func overflowed() dialResult { return dialResult{err: errOverflow, reason: resetOverflow} }

// dialFailure maps a failed connect to ConnectionPool::PoolFailureReason: timeout →
// connection timeout, anything else → remote connection failure with Envoy's
// transport failure reason ("delayed connect error: 111" for a refused connection).
func dialFailure(ctx, cctx context.Context, err error, detail string) dialResult {
	if ctx.Err() != nil {
		return dialResult{err: ctx.Err()}
	}
	if cctx.Err() != nil {
		return dialResult{err: err, reason: resetConnectionTimeout}
	}
	if detail == "" {
		detail = err.Error()
		if errors.Is(err, syscall.ECONNREFUSED) {
			detail = "delayed connect error: 111"
		}
	}
	return dialResult{err: err, reason: resetRemoteConnectionFailure, detail: detail}
}

// oneConn hands a pre-dialed connection to an http.Transport exactly once.
type oneConn struct {
	mu   sync.Mutex
	conn net.Conn
}

func (o *oneConn) dial(context.Context, string, string) (net.Conn, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.conn
	o.conn = nil
	if c == nil {
		return nil, errors.New("envoysim: attempt connection already used")
	}
	return c, nil
}

// speaksH2 reports whether the attempt will speak HTTP/2: ALPN over TLS, else the
// cluster's explicit protocol.
func (o *oneConn) speaksH2(h *host) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if tc, ok := o.conn.(*tls.Conn); ok {
		return tc.ConnectionState().NegotiatedProtocol == "h2"
	}
	return h.cluster.protocol == protoHTTP2
}

func (o *oneConn) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.conn != nil {
		_ = o.conn.Close()
		o.conn = nil
	}
}

// run asks for a connection as soon as the attempt starts, in parallel with the
// upstream filters (acceptHeadersFromRouter calls conn_pool_->newStream before the
// filters run), and sends the request once both the headers and the connection are
// there (UpstreamCodecFilter waits for onPoolReady).
//
// A failed connect becomes the attempt's reset only after a flush marker, pushed by
// the router behind everything it already passed to the attempt, went through the
// upstream filters: in Envoy the filters run on the headers (and on whatever body
// the router already passed) synchronously in acceptHeadersFromRouter /
// acceptDataFromRouter, and onPoolFailure → onResetStream comes in a later event, so
// an upstream ext_proc has opened its stream and sent request_headers before the
// attempt is reset and its stream cancelled.
//
// The request is pending while its connection is being made and active once it is attached
// to it, each within the cluster's circuit breaker (max_pending_requests, max_requests); past
// either the pool fails with PoolFailureReason::Overflow (ConnPoolImplBase::newStreamImpl,
// attachStreamToClient), which the router does not retry.
func (cd *codec) run() {
	u := cd.u
	c := u.host.cluster
	dialed := make(chan dialResult, 1)
	var pending, active bool
	if pending = c.pending.acquire(); pending {
		u.st.go_(func() { dialed <- dial(u.ctx, u.host) })
	} else {
		dialed <- overflowed()
	}
	var oc *oneConn
	var reqHeaders *stream.Headers
	var reqEnd, sent bool
	var failed *dialResult
	body := stream.NewQueue[stream.Frame]()
	defer func() {
		if pending {
			c.pending.release()
		}
		if active {
			c.requests.release()
		}
		if oc != nil {
			oc.close()
		}
	}()
	for {
		select {
		case <-u.ctx.Done():
			return
		case res := <-dialed:
			if pending {
				c.pending.release()
				pending = false
			}
			if res.err == nil {
				if active = c.requests.acquire(); !active {
					_ = res.conn.Close()
					res = overflowed()
				}
			}
			if res.err != nil {
				failed = &res
				u.event(attemptEvent{kind: evPoolFailed})
				continue
			}
			oc = &oneConn{conn: res.conn}
			u.event(attemptEvent{kind: evPoolReady})
		case <-cd.in.Ready():
			for _, fr := range cd.in.Drain() {
				switch fr.Kind {
				case stream.KindFlush:
					if failed != nil && u.ctx.Err() == nil {
						// UpstreamRequest::onPoolFailure mimics an upstream reset.
						u.event(attemptEvent{kind: evReset, reason: failed.reason, detail: failed.detail})
						return
					}
				case stream.KindHeaders:
					reqHeaders, reqEnd = fr.Headers, fr.End
				default:
					body.Push(fr)
				}
			}
		}
		if !sent && oc != nil && reqHeaders != nil {
			sent = true
			req := cd.buildRequest(reqHeaders, reqEnd, body, oc.speaksH2(u.host))
			tr := cd.transport(oc)
			u.st.go_(func() { cd.roundTrip(tr, req) })
		}
	}
}

// buildRequest turns the request header map into an HTTP request for the host.
// Request trailers go only to HTTP/2 upstreams: Envoy's HTTP/1 codec drops them
// unless http_protocol_options.enable_trailers, which envoysim does not accept
// (source/common/http/http1/codec_impl.cc StreamEncoderImpl::encodeTrailersBase).
func (cd *codec) buildRequest(h *stream.Headers, end bool, body *stream.Queue[stream.Frame], h2 bool) *http.Request {
	u := cd.u
	scheme := "http"
	if u.host.tls != nil {
		scheme = "https"
	}
	req := &http.Request{
		Method:     h.Value(":method"),
		URL:        &url.URL{Scheme: scheme, Host: u.host.address, Opaque: h.Value(":path")},
		Host:       h.Value(":authority"),
		Header:     http.Header{},
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
	}
	req.ContentLength = -1
	for _, e := range h.All() {
		if strings.HasPrefix(e.Key, ":") || hopByHop[e.Key] || e.Key == "host" {
			continue
		}
		switch e.Key {
		case "content-length":
			if n, err := strconv.ParseInt(e.Value, 10, 64); err == nil {
				req.ContentLength = n
			}
		case "user-agent":
			req.Header["User-Agent"] = append(req.Header["User-Agent"], e.Value)
		default:
			req.Header[e.Key] = append(req.Header[e.Key], e.Value)
		}
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = nil // Envoy adds no user-agent; neither does Go then
	}
	wrote := make(chan struct{})
	var wroteOnce sync.Once
	if end {
		req.Body = http.NoBody
		req.ContentLength = 0
	} else {
		pr, pw := io.Pipe()
		req.Body = pr
		if h2 {
			// Go's HTTP/2 client sends whatever req.Trailer holds once the body ends,
			// and announces the keys present now in its own `trailer` header.
			req.Trailer = declaredTrailers(h)
			delete(req.Header, "trailer")
		}
		u.st.go_(func() { cd.pumpRequestBody(body, pw, req.Trailer, wrote) })
	}
	trace := &httptrace.ClientTrace{WroteHeaders: func() {
		u.started.Store(true)
		wroteOnce.Do(func() { close(wrote) })
	}}
	return req.WithContext(httptrace.WithClientTrace(u.ctx, trace))
}

// pumpRequestBody streams the request body to the upstream, and the request trailers
// into trailer (nil: not sent). The trailer map is filled only after the request
// headers were written, when Go's client no longer reads it until the body ends.
func (cd *codec) pumpRequestBody(body *stream.Queue[stream.Frame], pw *io.PipeWriter, trailer http.Header, wrote <-chan struct{}) {
	defer pw.Close()
	for {
		select {
		case <-cd.u.ctx.Done():
			pw.CloseWithError(context.Canceled)
			return
		case <-body.Ready():
			for _, fr := range body.Drain() {
				if fr.Kind == stream.KindTrailers && trailer != nil {
					select {
					case <-wrote:
					case <-cd.u.ctx.Done():
						pw.CloseWithError(context.Canceled)
						return
					}
					for _, e := range fr.Headers.All() {
						trailer[http.CanonicalHeaderKey(e.Key)] = append(trailer[http.CanonicalHeaderKey(e.Key)], e.Value)
					}
				}
				if len(fr.Data) > 0 {
					if _, err := pw.Write(fr.Data); err != nil {
						return
					}
				}
				if fr.End {
					return
				}
			}
		}
	}
}

// transport speaks the cluster's protocol on the pre-dialed connection:
// explicit_http_config http2 → HTTP/2 (h2c in plaintext), auto_config → ALPN over
// TLS and HTTP/1.1 in plaintext, default HTTP/1.1.
func (cd *codec) transport(oc *oneConn) *http.Transport {
	p := new(http.Protocols)
	switch {
	case cd.u.host.tls != nil:
		p.SetHTTP1(true)
		p.SetHTTP2(true)
	case cd.u.host.cluster.protocol == protoHTTP2:
		p.SetUnencryptedHTTP2(true)
	default:
		p.SetHTTP1(true)
	}
	return &http.Transport{
		DialContext:        oc.dial,
		DialTLSContext:     oc.dial,
		DisableCompression: true,
		Protocols:          p,
	}
}

// roundTrip sends the request and turns the response into frames for the upstream
// filters (UpstreamCodecFilter::CodecBridge::decodeHeaders/decodeData/decodeTrailers).
// Connection-specific response headers are dropped, as Envoy's codecs do.
func (cd *codec) roundTrip(tr *http.Transport, req *http.Request) {
	u := cd.u
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		cd.reset(err)
		return
	}
	defer resp.Body.Close()
	h := stream.NewHeaders(":status", strconv.Itoa(resp.StatusCode))
	keys := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		lk := strings.ToLower(k)
		if hopByHop[lk] {
			continue
		}
		for _, v := range resp.Header[k] {
			h.Add(lk, v)
		}
	}
	if resp.Body == http.NoBody || (resp.ContentLength == 0 && len(resp.TransferEncoding) == 0) {
		cd.out.Push(stream.HeadersFrame(h, true))
		return
	}
	cd.out.Push(stream.HeadersFrame(h, false))
	buf := make([]byte, 32*1024)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			cd.out.Push(stream.DataFrame(append([]byte(nil), buf[:n]...), false))
		}
		if errors.Is(err, io.EOF) {
			if len(resp.Trailer) > 0 {
				t := stream.NewHeaders()
				for k, vs := range resp.Trailer {
					for _, v := range vs {
						t.Add(strings.ToLower(k), v)
					}
				}
				cd.out.Push(stream.TrailersFrame(t))
			} else {
				cd.out.Push(stream.DataFrame(nil, true))
			}
			return
		}
		if err != nil {
			if u.ctx.Err() == nil {
				cd.reset(err)
			}
			return
		}
	}
}

// reset classifies a transport error as an Http::StreamResetReason and sends it
// toward the router through the upstream filters.
func (cd *codec) reset(err error) {
	u := cd.u
	if u.ctx.Err() != nil {
		return
	}
	msg := err.Error()
	reason := resetConnectionTermination
	switch {
	case strings.Contains(msg, "REFUSED_STREAM"):
		reason = resetRemoteRefusedStream
	case strings.Contains(msg, "stream error"):
		reason = resetRemote
	case strings.Contains(msg, "malformed HTTP") || strings.Contains(msg, "PROTOCOL_ERROR"):
		reason = resetProtocolError
	}
	cd.out.Push(stream.ResetFrame(&stream.Reset{Reason: int(reason)}))
}
