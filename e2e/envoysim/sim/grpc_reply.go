package sim

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// isGrpcRequest imitates Grpc::Common::isGrpcRequestHeaders
// (source/common/grpc/common.cc): a :path and a content-type of application/grpc,
// optionally followed by "+..." or ";...".
func isGrpcRequest(h *stream.Headers) bool {
	if !h.Has(":path") {
		return false
	}
	ct := h.Value("content-type")
	const grpc = "application/grpc"
	if !strings.HasPrefix(ct, grpc) {
		return false
	}
	return len(ct) == len(grpc) || ct[len(grpc)] == '+' || ct[len(grpc)] == ';'
}

// httpToGrpcStatus imitates Grpc::Utility::httpToGrpcStatus
// (source/common/grpc/status.cc).
func httpToGrpcStatus(code int) uint32 {
	switch code {
	case 400:
		return 13 // Internal
	case 401:
		return 16 // Unauthenticated
	case 403:
		return 7 // PermissionDenied
	case 404:
		return 12 // Unimplemented
	case 429, 502, 503, 504:
		return 14 // Unavailable
	}
	return 2 // Unknown
}

// percentEncode imitates Http::Utility::PercentEncoding::encode(value, "%"), used for
// grpc-message: '%' and bytes outside the printable ASCII range are %XX-encoded.
func percentEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' || c > '~' || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// writeGrpcLocalReply imitates the is_grpc branch of Utility::prepareLocalReply and
// encodeLocalReply: :status 200, content-type application/grpc, grpc-status (unless
// the header mutations set one) from the reply's gRPC status or its HTTP code,
// grpc-message from the body, no content-length and no body: a trailers-only
// response (headers with end_stream).
func (d *downstreamWriter) writeGrpcLocalReply(r *stream.LocalReply, h *stream.Headers) {
	h.Set(":status", "200")
	h.Set("content-type", "application/grpc")
	if h.Value("grpc-status") == "" {
		gs := httpToGrpcStatus(r.Status)
		if r.GrpcStatus != nil {
			gs = *r.GrpcStatus
		}
		h.Set("grpc-status", strconv.FormatUint(uint64(gs), 10))
	}
	if r.Body != "" {
		h.Set("grpc-message", percentEncode(r.Body))
	}
	h.Del("content-length")
	d.localReply = true
	d.writeHeadersOnly(h)
}
