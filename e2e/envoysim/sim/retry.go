package sim

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ppv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/match"
	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// retry_on bits (RetryPolicy::RETRY_ON_* in envoy/router/router.h; values parsed by
// RetryStateImpl::parseRetryOn, source/common/router/retry_state_impl.cc).
const (
	retryOn5xx uint32 = 1 << iota
	retryOnGatewayError
	retryOnConnectFailure
	retryOnRetriable4xx
	retryOnRefusedStream
	retryOnRetriableStatusCodes
	retryOnRetriableHeaders
	retryOnReset
	retryOnResetBeforeRequest
	retryOnEnvoyRateLimited
)

var retryOnNames = map[string]uint32{
	"5xx":                    retryOn5xx,
	"gateway-error":          retryOnGatewayError,
	"connect-failure":        retryOnConnectFailure,
	"retriable-4xx":          retryOnRetriable4xx,
	"refused-stream":         retryOnRefusedStream,
	"retriable-status-codes": retryOnRetriableStatusCodes,
	"retriable-headers":      retryOnRetriableHeaders,
	"reset":                  retryOnReset,
	"reset-before-request":   retryOnResetBeforeRequest,
	"envoy-ratelimited":      retryOnEnvoyRateLimited,
}

// parseRetryOn imitates RetryStateImpl::parseRetryOn (comma separated, whitespace
// trimmed); ok is false if a value is unknown.
func parseRetryOn(s string) (bits uint32, ok bool) {
	ok = true
	for _, tok := range strings.Split(s, ",") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		b, known := retryOnNames[tok]
		if !known {
			ok = false
			continue
		}
		bits |= b
	}
	return bits, ok
}

// retryPolicy is a compiled RetryPolicy (RetryPolicyImpl in config_impl.cc).
type retryPolicy struct {
	retryOn              uint32
	numRetries           int
	perTryTimeout        time.Duration
	previousPriorities   int // update_frequency, 0 = plugin not configured
	previousHosts        bool
	hostSelectAttempts   int
	retriableStatusCodes []int
	baseInterval         time.Duration
	maxInterval          time.Duration
	retriableHeaders     []*match.Header
	retriableReqHeaders  []*match.Header
}

// compileRetryPolicy imitates RetryPolicyImpl: num_retries default 1, back-off base
// 25 ms and max 10x base, retry plugins instantiated from their typed configs.
func compileRetryPolicy(pb *routev3.RetryPolicy) (*retryPolicy, error) {
	bits, ok := parseRetryOn(pb.GetRetryOn())
	if !ok {
		return nil, fmt.Errorf("retry_on %q: envoysim supports %s", pb.GetRetryOn(), "5xx, gateway-error, connect-failure, retriable-4xx, refused-stream, retriable-status-codes, retriable-headers, reset, reset-before-request, envoy-ratelimited")
	}
	rp := &retryPolicy{
		retryOn:            bits,
		numRetries:         1, // num_retries default
		perTryTimeout:      pb.GetPerTryTimeout().AsDuration(),
		hostSelectAttempts: int(pb.GetHostSelectionRetryMaxAttempts()),
		baseInterval:       25 * time.Millisecond, // runtime upstream.base_retry_backoff_ms default
	}
	if pb.GetNumRetries() != nil {
		rp.numRetries = int(pb.GetNumRetries().GetValue())
	}
	for _, c := range pb.GetRetriableStatusCodes() {
		rp.retriableStatusCodes = append(rp.retriableStatusCodes, int(c))
	}
	if bo := pb.GetRetryBackOff(); bo != nil {
		rp.baseInterval = bo.GetBaseInterval().AsDuration()
		if bo.GetMaxInterval() != nil {
			rp.maxInterval = bo.GetMaxInterval().AsDuration()
			if rp.maxInterval < rp.baseInterval {
				return nil, fmt.Errorf("retry_back_off: max_interval must be greater than or equal to the base_interval")
			}
		}
	}
	if rp.maxInterval == 0 {
		rp.maxInterval = 10 * rp.baseInterval // "defaults to 10 times the base_interval"
	}
	for _, hm := range pb.GetRetriableHeaders() {
		h, err := match.NewHeader(hm)
		if err != nil {
			return nil, err
		}
		rp.retriableHeaders = append(rp.retriableHeaders, h)
	}
	for _, hm := range pb.GetRetriableRequestHeaders() {
		h, err := match.NewHeader(hm)
		if err != nil {
			return nil, err
		}
		rp.retriableReqHeaders = append(rp.retriableReqHeaders, h)
	}
	if p := pb.GetRetryPriority(); p != nil {
		msg, err := p.GetTypedConfig().UnmarshalNew()
		if err != nil {
			return nil, fmt.Errorf("retry_priority: %w", err)
		}
		cfg, ok := msg.(*ppv3.PreviousPrioritiesConfig)
		if !ok {
			return nil, fmt.Errorf("retry_priority %s is not supported by envoysim", p.GetName())
		}
		rp.previousPriorities = int(cfg.GetUpdateFrequency())
	}
	for _, p := range pb.GetRetryHostPredicate() {
		if typeName(p.GetTypedConfig().GetTypeUrl()) != "envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate" {
			return nil, fmt.Errorf("retry_host_predicate %s is not supported by envoysim", p.GetName())
		}
		rp.previousHosts = true
	}
	return rp, nil
}

type retryStatus int

const (
	retryNo retryStatus = iota
	retryYes
	retryNoOverflow
	retryNoLimitExceeded
)

// retryState imitates RetryStateImpl for one downstream request.
type retryState struct {
	retryOn       uint32
	remaining     int
	statusCodes   []int
	headers       []*match.Header
	cluster       *cluster
	holdsResource bool
	nextInterval  time.Duration
	maxInterval   time.Duration
}

// newRetryState imitates RetryStateImpl::create: nil when nothing can be retried.
// The x-envoy-retry-* request headers are merged in and always consumed so they never
// reach the upstream.
func newRetryState(p *retryPolicy, req *stream.Headers, c *cluster) *retryState {
	var policyOn uint32
	if p != nil {
		policyOn = p.retryOn
	}
	_, hasHeader := req.Get("x-envoy-retry-on")
	var rs *retryState
	if hasHeader || policyOn != 0 {
		rs = &retryState{retryOn: policyOn, remaining: 1, cluster: c, nextInterval: 25 * time.Millisecond, maxInterval: 250 * time.Millisecond}
		if p != nil {
			rs.remaining = p.numRetries
			rs.statusCodes = append(rs.statusCodes, p.retriableStatusCodes...)
			rs.headers = append(rs.headers, p.retriableHeaders...)
			rs.nextInterval, rs.maxInterval = p.baseInterval, p.maxInterval
		}
		if v, ok := req.Get("x-envoy-retry-on"); ok {
			b, _ := parseRetryOn(v)
			rs.retryOn |= b
		}
		if p != nil && len(p.retriableReqHeaders) > 0 {
			matched := false
			for _, h := range p.retriableReqHeaders {
				if h.Matches(req) {
					matched = true
					break
				}
			}
			if !matched {
				rs.retryOn = 0
			}
		}
		if v, ok := req.Get("x-envoy-max-retries"); ok && rs.retryOn != 0 {
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				rs.remaining = n
			}
		}
		if v, ok := req.Get("x-envoy-retriable-status-codes"); ok {
			for _, tok := range strings.Split(v, ",") {
				if n, err := strconv.Atoi(strings.TrimSpace(tok)); err == nil {
					rs.statusCodes = append(rs.statusCodes, n)
				}
			}
		}
	}
	for _, h := range []string{"x-envoy-retry-on", "x-envoy-retry-grpc-on", "x-envoy-max-retries",
		"x-envoy-hedge-on-per-try-timeout", "x-envoy-retriable-header-names", "x-envoy-retriable-status-codes",
		"x-envoy-upstream-rq-per-try-timeout-ms"} {
		req.Del(h)
	}
	return rs
}

func (rs *retryState) enabled() bool { return rs != nil && rs.retryOn != 0 }

// release imitates RetryStateImpl::resetRetry: the cluster's retry resource
// (circuit_breakers max_retries) is held from scheduling a retry until the next
// retry decision or the end of the request.
func (rs *retryState) release() {
	if rs != nil && rs.holdsResource {
		rs.cluster.retries.release()
		rs.holdsResource = false
	}
}

// shouldRetry imitates RetryStateImpl::shouldRetry.
func (rs *retryState) shouldRetry(would bool) retryStatus {
	rs.release()
	if !would {
		return retryNo
	}
	if rs.remaining == 0 {
		return retryNoLimitExceeded
	}
	rs.remaining--
	if !rs.cluster.retries.acquire() {
		return retryNoOverflow
	}
	rs.holdsResource = true
	return retryYes
}

// wouldRetryFromHeaders imitates RetryStateImpl::wouldRetryFromHeaders on the response
// headers as they leave the upstream filter chain.
func (rs *retryState) wouldRetryFromHeaders(resp *stream.Headers) bool {
	if resp.Has("x-envoy-overloaded") {
		return false
	}
	if resp.Has("x-envoy-ratelimited") {
		return rs.retryOn&retryOnEnvoyRateLimited != 0
	}
	code, _ := strconv.Atoi(resp.Value(":status"))
	if rs.retryOn&retryOn5xx != 0 && code >= 500 && code < 600 {
		return true
	}
	if rs.retryOn&retryOnGatewayError != 0 && (code == 502 || code == 503 || code == 504) {
		return true
	}
	if rs.retryOn&retryOnRetriable4xx != 0 && code == 409 {
		return true
	}
	if rs.retryOn&retryOnRetriableStatusCodes != 0 {
		for _, c := range rs.statusCodes {
			if c == code {
				return true
			}
		}
	}
	if rs.retryOn&retryOnRetriableHeaders != 0 {
		for _, h := range rs.headers {
			if h.Matches(resp) {
				return true
			}
		}
	}
	return false
}

// wouldRetryFromReset imitates RetryStateImpl::wouldRetryFromReset. A per-try timeout
// is a local reset, so it is retried only with reset, 5xx or gateway-error.
func (rs *retryState) wouldRetryFromReset(r resetReason, upstreamRequestStarted bool) bool {
	if r == resetOverflow {
		return false
	}
	if rs.retryOn&retryOnReset != 0 {
		return true
	}
	if rs.retryOn&retryOnResetBeforeRequest != 0 && !upstreamRequestStarted {
		return true
	}
	if rs.retryOn&(retryOn5xx|retryOnGatewayError) != 0 {
		return true // an upstream reset counts as a 5xx
	}
	if rs.retryOn&retryOnRefusedStream != 0 && r == resetRemoteRefusedStream {
		return true
	}
	if rs.retryOn&retryOnConnectFailure != 0 && (r == resetLocalConnectionFailure || r == resetRemoteConnectionFailure || r == resetConnectionTimeout) {
		return true
	}
	return false
}

// backoff imitates JitteredExponentialBackOffStrategy::nextBackOffMs: a random delay in
// [0, interval), interval starting at base_interval and doubling up to max_interval.
func (rs *retryState) backoff() time.Duration {
	cur := rs.nextInterval
	if cur <= 0 {
		return 0
	}
	if rs.nextInterval > rs.maxInterval/2 {
		rs.nextInterval = rs.maxInterval
	} else {
		rs.nextInterval *= 2
	}
	return min(time.Duration(rand.Int64N(int64(cur))), rs.maxInterval)
}

// resetReason imitates Http::StreamResetReason.
type resetReason int

const (
	resetLocalConnectionFailure resetReason = iota
	resetRemoteConnectionFailure
	resetConnectionTimeout
	resetConnectionTermination
	resetLocal
	resetRemote
	resetRemoteRefusedStream
	resetProtocolError
	resetOverflow
)

// String imitates Http::Utility::resetReasonToString.
func (r resetReason) String() string {
	switch r {
	case resetLocalConnectionFailure:
		return "local connection failure"
	case resetRemoteConnectionFailure:
		return "remote connection failure"
	case resetConnectionTimeout:
		return "connection timeout"
	case resetConnectionTermination:
		return "connection termination"
	case resetLocal:
		return "local reset"
	case resetRemote:
		return "remote reset"
	case resetRemoteRefusedStream:
		return "remote refused stream reset"
	case resetProtocolError:
		return "protocol error"
	case resetOverflow:
		return "overflow"
	}
	return "unknown"
}

// flag imitates Filter::streamResetReasonToResponseFlag.
func (r resetReason) flag() string {
	switch r {
	case resetLocalConnectionFailure, resetRemoteConnectionFailure, resetConnectionTimeout:
		return "UF"
	case resetConnectionTermination:
		return "UC"
	case resetLocal:
		return "LR"
	case resetOverflow:
		return "UO"
	case resetRemote, resetRemoteRefusedStream:
		return "UR"
	case resetProtocolError:
		return "UPE"
	}
	return ""
}
