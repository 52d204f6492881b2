package sim

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// Defaults of HttpConnectionManagerConfig
// (source/extensions/filters/network/http_connection_manager/config.cc, the HCM
// constructor): stream_idle_timeout 5 min (StreamIdleTimeoutMs), request_timeout and
// max_stream_duration off, common_http_protocol_options.idle_timeout 1 h (0
// disables), max_headers_count 100 (DEFAULT_MAX_HEADERS_COUNT), max_request_headers_kb
// 60 (DEFAULT_MAX_REQUEST_HEADERS_KB).
const (
	defaultStreamIdleTimeout  = 5 * time.Minute
	defaultConnIdleTimeout    = time.Hour
	defaultMaxHeadersCount    = stream.DefaultMaxHeadersCount
	defaultMaxRequestHeadersK = stream.DefaultMaxHeadersBytes / 1024
)

// hcmLimits are the HCM's timeouts and codec limits.
type hcmLimits struct {
	streamIdleTimeout   time.Duration // 0 = off
	requestTimeout      time.Duration // 0 = off
	maxStreamDuration   time.Duration // 0 = off
	connIdleTimeout     time.Duration // 0 = off
	maxHeadersCount     int
	maxRequestHeadersKB int
	underscores         corev3.HttpProtocolOptions_HeadersWithUnderscoresAction
}

// compileLimits reads them (max_response_headers_kb, which Envoy refuses on the HCM,
// is rejected by the allow-list).
func compileLimits(pb *hcmv3.HttpConnectionManager) (hcmLimits, error) {
	l := hcmLimits{
		streamIdleTimeout:   defaultStreamIdleTimeout,
		connIdleTimeout:     defaultConnIdleTimeout,
		maxHeadersCount:     defaultMaxHeadersCount,
		maxRequestHeadersKB: defaultMaxRequestHeadersK,
	}
	if d := pb.GetStreamIdleTimeout(); d != nil {
		l.streamIdleTimeout = d.AsDuration()
	}
	if d := pb.GetRequestTimeout(); d != nil {
		l.requestTimeout = d.AsDuration()
	}
	if v := pb.GetMaxRequestHeadersKb(); v != nil {
		l.maxRequestHeadersKB = int(v.GetValue())
	}
	cp := pb.GetCommonHttpProtocolOptions()
	if d := cp.GetIdleTimeout(); d != nil {
		l.connIdleTimeout = d.AsDuration()
	}
	if d := cp.GetMaxStreamDuration(); d != nil {
		l.maxStreamDuration = d.AsDuration()
	}
	if v := cp.GetMaxHeadersCount(); v != nil {
		l.maxHeadersCount = int(v.GetValue())
	}
	l.underscores = cp.GetHeadersWithUnderscoresAction()
	return l, nil
}

// codecCheck imitates the downstream codec's request header checks
// (source/common/http/http1/codec_impl.cc checkHeaderNameForUnderscores /
// checkMaxHeadersCount and the headers size check; http2/codec_impl.cc
// saveHeader/onHeaders): headers with underscores dropped or rejected
// (headers_with_underscores_action), more than max_headers_count headers or more
// than max_request_headers_kb of header bytes rejected. It returns "" when the
// request may go on; else the response code details. HTTP/1 answers a rejected
// request with a local reply (431, or 400 for an underscore) and closes the
// connection; HTTP/2 resets the stream.
func (l *hcmLimits) codecCheck(r *http.Request) (code int, details string) {
	proto := "http1."
	count, size := 0, 0
	if r.ProtoMajor == 2 {
		proto = "http2."
		// The HTTP/2 header map holds the pseudo-headers too.
		count = 4
		size = len(":method") + len(r.Method) + len(":path") + len(r.RequestURI) +
			len(":authority") + len(r.Host) + len(":scheme") + len("http")
	} else {
		count, size = 1, len("host")+len(r.Host)
	}
	for k, vs := range r.Header {
		if strings.Contains(k, "_") {
			switch l.underscores {
			case corev3.HttpProtocolOptions_REJECT_REQUEST:
				return 400, proto + "unexpected_underscore"
			case corev3.HttpProtocolOptions_DROP_HEADER:
				delete(r.Header, k)
				continue
			}
		}
		for _, v := range vs {
			count++
			size += len(k) + len(v)
		}
	}
	if count > l.maxHeadersCount {
		return 431, proto + "too_many_headers"
	}
	if size > l.maxRequestHeadersKB*1024 {
		return 431, proto + "headers_too_large"
	}
	return 0, ""
}

// rejectByCodec answers a request the codec refused: Http1::ServerConnectionImpl::
// sendProtocolError sends a local reply whose body is the code's reason phrase and
// closes the connection; HTTP/2 resets the stream.
func (h *hcmConfig) rejectByCodec(w http.ResponseWriter, r *http.Request, code int, details string) {
	e := AccessLogEntry{Listener: h.listener, Method: r.Method, Authority: r.Host, Path: r.RequestURI,
		ResponseCodeDetails: details, DownstreamReset: r.ProtoMajor == 2}
	if r.ProtoMajor != 2 {
		e.ResponseCode = code
	}
	if h.s.opts.accessLog != nil {
		h.s.opts.accessLog(e)
	}
	if r.ProtoMajor == 2 {
		panic(http.ErrAbortHandler)
	}
	body := http.StatusText(code)
	w.Header().Set("connection", "close")
	w.Header().Set("content-length", strconv.Itoa(len(body)))
	w.Header().Set("content-type", "text/plain")
	w.Header()["server"] = []string{h.serverName}
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}
