package sim

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// router imitates Envoy's router filter (source/common/router/router.cc, Filter) for
// one downstream stream: route and cluster resolved once, per-attempt host choice,
// retries, timeouts, the commit point and internal redirects.
type router struct {
	st  *activeStream
	cfg *routerConfig
	in  *stream.Queue[stream.Frame] // decode frames from the last downstream filter
	out *stream.Queue[stream.Frame] // encode frames to the last downstream filter

	headers *stream.Headers
	rr      *resolvedRoute
	cluster *cluster
	rs      *retryState
	lb      *lbContext

	globalTimeout time.Duration
	perTryTimeout time.Duration
	timeoutCode   int

	bufferLimit      int
	body             []byte
	hasBody          bool
	overflowed       bool
	trailers         *stream.Headers
	downstreamEnd    bool
	requestComplete  time.Time
	requestStarted   bool // upstream_request_started_: bytes went to an upstream
	attemptCount     int
	isRetry          bool
	includeAttempt   bool
	includeInResp    bool
	cur              *upstreamRequest
	committed        bool // downstream_response_started_
	done             bool
	globalTimer      timer
	perTryTimer      timer
	retryTimer       timer
	perTryTimerOwner *upstreamRequest
}

func newRouter(st *activeStream) *router {
	return &router{
		st:          st,
		cfg:         st.hcm.router,
		in:          st.chain.TermIn,
		out:         st.chain.TermOut,
		timeoutCode: 504,
	}
}

// timer is a restartable timer whose channel is nil while stopped.
type timer struct {
	t  *time.Timer
	on bool
}

func (t *timer) start(d time.Duration) {
	if t.t == nil {
		t.t = time.NewTimer(d)
	} else {
		t.t.Reset(d)
	}
	t.on = true
}

func (t *timer) stop() {
	if t.t != nil {
		t.t.Stop()
	}
	t.on = false
}

func (t *timer) c() <-chan time.Time {
	if !t.on {
		return nil
	}
	return t.t.C
}

// run is the router filter's event loop: Envoy calls the same Filter methods from its
// dispatcher (decodeHeaders/decodeData, UpstreamRequest callbacks, timers).
func (r *router) run(ctx context.Context) {
	defer r.cleanup()
	for !r.done {
		var attOut <-chan struct{}
		var attCtl <-chan attemptEvent
		cur := r.cur
		if cur != nil {
			attOut = cur.encOut.Ready()
			attCtl = cur.ctrl
		}
		select {
		case <-ctx.Done():
			return
		case <-r.in.Ready():
			for _, fr := range r.in.Drain() {
				if r.done {
					break
				}
				r.onDecodeFrame(fr)
			}
		case <-attOut:
			r.drainAttempt(cur)
		case ev := <-attCtl:
			// Frames that already left the upstream filter chain come first: Envoy
			// runs the chain synchronously, so they reached the router before the event.
			r.drainAttempt(cur)
			if !r.done && r.cur == cur {
				r.onAttemptEvent(cur, ev)
			}
		case <-r.globalTimer.c():
			r.globalTimer.on = false
			r.onResponseTimeout()
		case <-r.perTryTimer.c():
			r.perTryTimer.on = false
			if r.perTryTimerOwner == r.cur && r.cur != nil {
				r.onPerTryTimeout(r.cur)
			}
		case <-r.retryTimer.c():
			r.retryTimer.on = false
			r.doRetry()
		}
	}
}

// drainAttempt processes the frames an attempt's upstream filter chain passed on.
func (r *router) drainAttempt(u *upstreamRequest) {
	for _, fr := range u.encOut.Drain() {
		if r.done || r.cur != u {
			return
		}
		r.onAttemptFrame(u, fr)
	}
}

// cleanup imitates Filter::onDestroy / cleanup: reset in-flight attempts, stop timers,
// release the retry resource.
func (r *router) cleanup() {
	if r.cur != nil {
		r.cur.reset()
		r.cur = nil
	}
	r.globalTimer.stop()
	r.perTryTimer.stop()
	r.retryTimer.stop()
	if r.rs != nil {
		r.rs.release()
	}
}

// onDecodeFrame dispatches Filter::decodeHeaders / decodeData / decodeTrailers.
func (r *router) onDecodeFrame(fr stream.Frame) {
	switch fr.Kind {
	case stream.KindHeaders:
		r.decodeHeaders(fr.Headers, fr.End)
	case stream.KindData:
		r.decodeData(fr.Data, fr.End)
	case stream.KindTrailers:
		r.decodeTrailers(fr.Headers)
	}
}

// localReply sends an Envoy local reply from the router (callbacks_->sendLocalReply
// with modify_headers_): it travels the encode path; the HCM turns it into a reset
// if response headers already went out.
func (r *router) localReply(code int, body, flag, details string) {
	inResp, attempts := r.includeInResp, r.attemptCount
	r.out.Push(stream.LocalReplyFrame(&stream.LocalReply{
		Status:  code,
		Body:    body,
		Flag:    flag,
		Details: details,
		Mutate: func(h *stream.Headers) {
			if inResp && attempts > 0 {
				h.Set("x-envoy-attempt-count", strconv.Itoa(attempts))
			}
		},
	}))
	r.done = true
}

// decodeHeaders imitates Filter::decodeHeaders.
func (r *router) decodeHeaders(h *stream.Headers, end bool) {
	r.headers = h
	rr := r.st.route()
	if rr == nil {
		r.localReply(404, "", "NR", "route_not_found")
		return
	}
	if rr.route.direct != nil {
		r.directResponse(rr.route.direct)
		return
	}
	r.rr = rr
	r.bufferLimit = r.st.bufferLimit()
	c := r.st.hcm.s.cm.get(rr.cluster)
	if c == nil {
		r.localReply(rr.route.notFoundCode, "", "NC", "cluster_not_found")
		return
	}
	r.cluster = c
	r.st.setCluster(c)
	vh := rr.route.vh
	r.includeAttempt, r.includeInResp = vh.includeAttemptCount, vh.includeAttemptInResp
	policy := rr.route.retry
	r.lb = &lbContext{}
	if policy != nil {
		r.lb.previousHosts = policy.previousHosts
		r.lb.hostSelectAttempts = policy.hostSelectAttempts
		if policy.previousPriorities > 0 {
			r.lb.priority = &previousPriorities{updateFrequency: policy.previousPriorities}
		}
	}
	// createConnPool picks the host before anything else (router.cc decodeHeaders).
	host := c.chooseHost(r.lb)
	if host == nil {
		r.noHealthyUpstream()
		return
	}
	r.finalTimeout(h, policy)
	if !r.finalHedgingParams(h) {
		return
	}
	if r.includeAttempt {
		h.Set("x-envoy-attempt-count", "1")
	}
	r.attemptCount = 1
	// FilterUtility::setUpstreamScheme: keep a valid :scheme, else x-forwarded-proto.
	if s := h.Value(":scheme"); s != "http" && s != "https" {
		if x := h.Value("x-forwarded-proto"); x == "http" || x == "https" {
			h.Set(":scheme", x)
		} else {
			h.Set(":scheme", "http")
		}
	}
	r.rs = newRetryState(policy, h, c)
	r.startAttempt(host, end)
	if end {
		r.onRequestComplete()
	}
}

// finalTimeout imitates FilterUtility::finalTimeout: route timeout (default 15 s, 0
// disables), x-envoy-upstream-rq-timeout-ms and x-envoy-upstream-rq-per-try-timeout-ms
// override and are removed; a per-try timeout not below the global one is ignored.
func (r *router) finalTimeout(h *stream.Headers, p *retryPolicy) {
	r.globalTimeout = r.rr.route.timeout
	if p != nil {
		r.perTryTimeout = p.perTryTimeout
	}
	if v, ok := h.Get("x-envoy-upstream-rq-timeout-ms"); ok {
		if ms, err := strconv.ParseUint(v, 10, 64); err == nil {
			r.globalTimeout = time.Duration(ms) * time.Millisecond
		}
		h.Del("x-envoy-upstream-rq-timeout-ms")
	}
	if v, ok := h.Get("x-envoy-upstream-rq-per-try-timeout-ms"); ok {
		if ms, err := strconv.ParseUint(v, 10, 64); err == nil {
			r.perTryTimeout = time.Duration(ms) * time.Millisecond
		}
		h.Del("x-envoy-upstream-rq-per-try-timeout-ms")
	}
	if _, ok := h.Get("x-envoy-upstream-rq-timeout-alt-response"); ok {
		r.timeoutCode = 204
		h.Del("x-envoy-upstream-rq-timeout-alt-response")
	}
	if r.perTryTimeout >= r.globalTimeout && r.globalTimeout != 0 {
		r.perTryTimeout = 0
	}
	r.setTimeoutHeaders(0)
}

// finalHedgingParams imitates FilterUtility::finalHedgingParams: the request header
// x-envoy-hedge-on-per-try-timeout ("true"/"false") overrides the route's
// hedge_policy and is always removed. envoysim implements no hedging (route
// hedge_policy is rejected at load), so a request asking for it while a per-try
// timeout applies — the only case where Envoy would behave differently: the per-try
// timeout would no longer reset the attempt (Filter::onSoftPerTryTimeout) — is
// refused with a 500 local reply instead of diverging silently.
func (r *router) finalHedgingParams(h *stream.Headers) bool {
	v, ok := h.Get("x-envoy-hedge-on-per-try-timeout")
	if !ok {
		return true
	}
	h.Del("x-envoy-hedge-on-per-try-timeout")
	if v != "true" || r.perTryTimeout <= 0 {
		return true
	}
	r.st.hcm.s.log.Error("envoysim does not implement hedging: request with x-envoy-hedge-on-per-try-timeout: true and a per-try timeout refused")
	r.localReply(500, "envoysim: x-envoy-hedge-on-per-try-timeout is not supported", "", "envoysim_hedging_not_supported")
	return false
}

// setTimeoutHeaders imitates FilterUtility::setTimeoutHeaders:
// x-envoy-expected-rq-timeout-ms tells the upstream how long it has.
func (r *router) setTimeoutHeaders(elapsed time.Duration) {
	if r.cfg.suppressEnvoyHeaders {
		return
	}
	expected := r.perTryTimeout
	if expected == 0 {
		expected = r.globalTimeout
	}
	if expected <= 0 {
		return
	}
	if r.globalTimeout > 0 {
		if elapsed >= r.globalTimeout {
			expected = time.Millisecond
		} else {
			expected = min(expected, r.globalTimeout-elapsed)
		}
	}
	r.headers.Set("x-envoy-expected-rq-timeout-ms", strconv.FormatInt(expected.Milliseconds(), 10))
}

// noHealthyUpstream imitates Filter::sendNoHealthyUpstreamResponse.
func (r *router) noHealthyUpstream() {
	r.localReply(503, "no healthy upstream", "UH", "no_healthy_upstream")
}

// buffering imitates the decodeData condition: a request is buffered while a retry
// or an internal redirect may replay it.
func (r *router) buffering() bool {
	return r.rs.enabled() || (r.rr != nil && r.rr.route.redirect != nil && !r.overflowed)
}

// decodeData imitates Filter::decodeData.
func (r *router) decodeData(b []byte, end bool) {
	buffering := r.buffering()
	if buffering && len(r.body)+len(b) > r.bufferLimit {
		// "The request payload has at least N bytes data which exceeds buffer limit.
		// Give up on the retry/shadow."
		if r.rs != nil {
			r.rs.release()
		}
		r.rs = nil
		buffering = false
		r.overflowed = true
		if r.cur == nil {
			r.localReply(507, "exceeded request buffer limit while retrying upstream", "", "request_payload_exceeded_retry_buffer_limit")
			return
		}
	}
	if buffering {
		if r.cur != nil {
			r.cur.sendData(append([]byte(nil), b...), end)
		}
		r.body = append(r.body, b...)
		r.hasBody = true
	} else {
		if r.cur == nil {
			r.localReply(503, "upstream is closed prematurely during decoding data from downstream", "", "early_upstream_reset")
			return
		}
		r.cur.sendData(b, end)
	}
	if end {
		r.onRequestComplete()
	}
}

// decodeTrailers imitates Filter::decodeTrailers: the trailers end the request.
func (r *router) decodeTrailers(t *stream.Headers) {
	r.trailers = t
	if r.cur != nil {
		r.cur.sendTrailers(t)
	}
	r.onRequestComplete()
}

// onRequestComplete imitates Filter::onRequestComplete: the route timeout starts when
// the whole request was received; per-try timeouts start once a connection exists.
func (r *router) onRequestComplete() {
	notify(r.st.decodeDone) // the HCM disarms request_timeout
	r.downstreamEnd = true
	r.requestComplete = time.Now()
	if r.cur == nil {
		return
	}
	if r.globalTimeout > 0 {
		r.globalTimer.start(r.globalTimeout)
	}
	if r.cur.createPerTryOnComplete {
		r.setupPerTryTimeout(r.cur)
	}
}

// setupPerTryTimeout imitates UpstreamRequest::setupPerTryTimeout.
func (r *router) setupPerTryTimeout(u *upstreamRequest) {
	if r.perTryTimeout > 0 {
		r.perTryTimerOwner = u
		r.perTryTimer.start(r.perTryTimeout)
	}
}

// startAttempt creates the UpstreamRequest for the chosen host (one per attempt) and
// hands it the request headers (acceptHeadersFromRouter).
func (r *router) startAttempt(h *host, end bool) {
	if r.rs != nil {
		r.lb.onHostAttempted(h) // RetryState::onHostAttempted via onUpstreamHostSelected
	}
	r.st.setAttempt(r.attemptCount, h)
	u := newUpstreamRequest(r, h, r.attemptCount)
	r.cur = u
	u.start(r.headers, end)
}

// onAttemptEvent handles the connection pool callbacks (onPoolReady, onPoolFailure).
func (r *router) onAttemptEvent(u *upstreamRequest, ev attemptEvent) {
	switch ev.kind {
	case evPoolReady:
		// UpstreamRequest::onPoolReady.
		if r.downstreamEnd {
			r.setupPerTryTimeout(u)
		} else {
			u.createPerTryOnComplete = true
		}
	case evPoolFailed:
		// Everything this router already passed to the attempt reaches the upstream
		// filters before the failure does (see codec.run).
		u.chain.In.Push(stream.FlushFrame())
	case evReset:
		r.onUpstreamReset(u, ev.reason, ev.detail)
	}
}

// onAttemptFrame handles what leaves the upstream filter chain toward the router:
// UpstreamRequest::decodeHeaders/decodeData/decodeTrailers and onResetStream.
func (r *router) onAttemptFrame(u *upstreamRequest, fr stream.Frame) {
	switch fr.Kind {
	case stream.KindHeaders:
		r.onUpstreamHeaders(u, fr.Headers, fr.End)
	case stream.KindData:
		if !r.committed {
			return
		}
		r.out.Push(stream.DataFrame(fr.Data, fr.End))
		if fr.End {
			r.onUpstreamComplete(u)
		}
	case stream.KindTrailers:
		if !r.committed {
			return
		}
		r.out.Push(fr)
		r.onUpstreamComplete(u)
	case stream.KindReset:
		r.onUpstreamReset(u, resetReason(fr.Reset.Reason), fr.Reset.Detail)
	case stream.KindLocalReply:
		// A local reply of the upstream filter manager (e.g. a buffer over its limit;
		// an upstream ext_proc never sends one, see Filter::sendImmediateResponse) goes
		// to the downstream stream and is final: never retried
		// (UpstreamFilterManager::sendLocalReply; http_protocol_options.proto "local
		// errors sent by upstream HTTP filters will not trigger retries").
		r.out.Push(fr)
		r.done = true
	}
}

// onUpstreamHeaders imitates Filter::onUpstreamHeaders: the retry decision and the
// internal redirect use the headers as they left the upstream filter chain; otherwise
// the response is committed.
func (r *router) onUpstreamHeaders(u *upstreamRequest, h *stream.Headers, end bool) {
	code, _ := strconv.Atoi(h.Value(":status"))
	if r.includeInResp {
		h.Set("x-envoy-attempt-count", strconv.Itoa(r.attemptCount))
	}
	if r.rs != nil && !u.retried {
		switch r.rs.shouldRetry(r.rs.wouldRetryFromHeaders(h)) {
		case retryYes:
			u.reset()
			r.cur = nil
			r.scheduleRetry()
			return
		case retryNoOverflow:
			r.st.addFlag("UO")
		case retryNoLimitExceeded:
			r.st.addFlag("URX")
		}
	}
	if rp := r.rr.route.redirect; rp != nil && rp.codes[code] && r.setupRedirect(h, code) {
		return
	}
	if r.rs != nil {
		r.rs.release()
		r.rs = nil
	}
	r.retryTimer.stop()
	r.rr.route.finalizeResponseHeaders(h)
	if !r.requestComplete.IsZero() && !r.cfg.suppressEnvoyHeaders {
		h.Set("x-envoy-upstream-service-time", strconv.FormatInt(time.Since(r.requestComplete).Milliseconds(), 10))
	}
	r.committed = true
	// Per-try timeouts no longer apply once the response started
	// (UpstreamRequest::onPerTryTimeout ignores them).
	r.perTryTimer.stop()
	r.st.setDetails("via_upstream")
	if end {
		r.onUpstreamComplete(u)
	}
	r.out.Push(stream.HeadersFrame(h, end))
}

// onUpstreamComplete imitates Filter::onUpstreamComplete.
func (r *router) onUpstreamComplete(u *upstreamRequest) {
	if !r.downstreamEnd {
		u.reset()
	}
	u.complete()
	r.cur = nil
	r.done = true
}

// scheduleRetry arms the back-off timer (RetryStateImpl::enableBackoffTimer).
func (r *router) scheduleRetry() {
	r.perTryTimer.stop()
	r.retryTimer.start(r.rs.backoff())
}

// maybeRetryReset imitates Filter::maybeRetryReset.
func (r *router) maybeRetryReset(reason resetReason, u *upstreamRequest) bool {
	if r.committed || r.rs == nil || u.retried {
		return false
	}
	r.requestStarted = r.requestStarted || u.started.Load()
	switch r.rs.shouldRetry(r.rs.wouldRetryFromReset(reason, r.requestStarted)) {
	case retryYes:
		u.reset()
		r.cur = nil
		r.scheduleRetry()
		return true
	case retryNoOverflow:
		r.st.addFlag("UO")
	case retryNoLimitExceeded:
		r.st.addFlag("URX")
	}
	return false
}

// onUpstreamReset imitates Filter::onUpstreamReset: retry, or a 503 (502 for protocol
// errors) local reply, which is a downstream reset after the commit.
func (r *router) onUpstreamReset(u *upstreamRequest, reason resetReason, detail string) {
	if r.maybeRetryReset(reason, u) {
		return
	}
	code := 503
	if reason == resetProtocolError {
		code = 502
	}
	u.reset()
	r.cur = nil
	body := "upstream connect error or disconnect/reset before headers. "
	if r.isRetry {
		body += "retried and the latest "
	}
	body += "reset reason: " + reason.String()
	if detail != "" {
		body += ", transport failure reason: " + detail
	}
	details := "upstream_reset_before_response_started"
	if r.committed {
		details = "upstream_reset_after_response_started"
	}
	inner := reason.String()
	if detail != "" {
		inner += "|" + detail
	}
	details = strings.Join(strings.Fields(details+"{"+inner+"}"), "_")
	r.onUpstreamAbort(code, reason.flag(), body, details)
}

// onUpstreamAbort imitates Filter::onUpstreamAbort: a local reply, which the HCM turns
// into a stream reset once the response started.
func (r *router) onUpstreamAbort(code int, flag, body, details string) {
	r.globalTimer.stop()
	r.perTryTimer.stop()
	r.retryTimer.stop()
	r.localReply(code, body, flag, details)
}

// onPerTryTimeout imitates UpstreamRequest::onPerTryTimeout and
// Filter::onPerTryTimeoutCommon: retried as a local reset before the commit.
func (r *router) onPerTryTimeout(u *upstreamRequest) {
	if r.committed {
		return // "ignored upstream per try timeout due to already started downstream response"
	}
	r.st.addFlag("UT")
	u.reset()
	if r.maybeRetryReset(resetLocal, u) {
		return
	}
	r.cur = nil
	r.onUpstreamTimeoutAbort("upstream_per_try_timeout")
}

// onResponseTimeout imitates Filter::onResponseTimeout (route timeout, including all
// retries): 504 before the commit, a downstream reset after it.
func (r *router) onResponseTimeout() {
	if r.cur != nil {
		r.cur.reset()
		r.cur = nil
	}
	r.st.addFlag("UT")
	r.onUpstreamTimeoutAbort("response_timeout")
}

// onUpstreamTimeoutAbort imitates Filter::onUpstreamTimeoutAbort: 504 "upstream
// request timeout" (204 with x-envoy-upstream-rq-timeout-alt-response).
func (r *router) onUpstreamTimeoutAbort(details string) {
	body := ""
	if r.timeoutCode == 504 {
		body = "upstream request timeout"
	}
	r.onUpstreamAbort(r.timeoutCode, "UT", body, details)
}

// doRetry imitates Filter::doRetry: same route and cluster, a new host choice, the
// attempt count updated before the upstream filters run, and the buffered body (as
// the downstream filters left it) replayed.
func (r *router) doRetry() {
	r.isRetry = true
	r.attemptCount++
	c := r.st.hcm.s.cm.get(r.rr.cluster)
	if c == nil {
		r.noHealthyUpstream()
		return
	}
	r.cluster = c
	r.lb.isRetry = true
	h := c.chooseHost(r.lb)
	if h == nil {
		r.noHealthyUpstream()
		return
	}
	if r.includeAttempt {
		r.headers.Set("x-envoy-attempt-count", strconv.Itoa(r.attemptCount))
	}
	elapsed := time.Duration(0)
	if !r.requestComplete.IsZero() {
		elapsed = time.Since(r.requestComplete)
	}
	r.setTimeoutHeaders(elapsed)
	end := !r.hasBody && r.trailers == nil && r.downstreamEnd
	r.startAttempt(h, end)
	if r.hasBody {
		r.cur.sendData(append([]byte(nil), r.body...), r.trailers == nil && r.downstreamEnd)
	}
	if r.trailers != nil {
		r.cur.sendTrailers(r.trailers)
	}
}

func (r *router) String() string { return fmt.Sprintf("router(attempt=%d)", r.attemptCount) }
