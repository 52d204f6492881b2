package sim

import (
	"io"
	"sync/atomic"
	"time"

	"github.com/switchyard-gw/switchyard/e2e/envoysim/sim/stream"
)

// streamTimers are the HCM's per-stream timers (ConnectionManagerImpl::ActiveStream,
// source/common/http/conn_manager_impl.cc): stream_idle_timeout (reset by every
// decode/encode event, overridden by the route's idle_timeout once the route is known:
// refreshIdleTimeout), request_timeout (until the whole request went through the
// decoder filters or the response started) and max_stream_duration (from stream
// creation). Each pass of an internal redirect is a new ActiveStream with new timers.
type streamTimers struct {
	idle, request, duration timer
	idleTimeout             time.Duration
}

func (st *activeStream) startTimers() *streamTimers {
	l := &st.hcm.limits
	t := &streamTimers{idleTimeout: st.idleTimeout()}
	t.resetIdle()
	if l.requestTimeout > 0 {
		t.request.start(l.requestTimeout)
	}
	if l.maxStreamDuration > 0 {
		t.duration.start(l.maxStreamDuration)
	}
	return t
}

// resetIdle imitates ActiveStream::resetIdleTimer.
func (t *streamTimers) resetIdle() {
	if t.idleTimeout > 0 {
		t.idle.start(t.idleTimeout)
	} else {
		t.idle.stop()
	}
}

func (t *streamTimers) stop() {
	t.idle.stop()
	t.request.stop()
	t.duration.stop()
}

// idleTimeout is the HCM's stream_idle_timeout unless the cached route sets
// RouteAction.idle_timeout (0 disables it).
func (st *activeStream) idleTimeout() time.Duration {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.cached != nil && st.cached.route.idleTimeout != nil {
		return *st.cached.route.idleTimeout
	}
	return st.hcm.limits.streamIdleTimeout
}

// timeoutReply imitates onIdleTimeout / onRequestTimeout / onStreamMaxDurationReached:
// a local reply with Http::Utility::maybeRequestTimeoutCode (504 once the downstream
// request was complete, else 408), which the filter manager turns into a reset once
// the response started.
func (st *activeStream) timeoutReply(out *downstreamWriter, body, flag, details string) passResult {
	code := 408
	if st.remoteDone.Load() {
		code = 504
	}
	_, reset := out.write(st, stream.LocalReplyFrame(&stream.LocalReply{Status: code, Body: body, Flag: flag, Details: details}))
	return passResult{reset: reset}
}

// notify is a non-blocking send on a 1-buffered signal channel.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// activityBody reports downstream body reads as stream activity (the codec's
// decodeData resets the idle timer) and marks the request complete at its end
// (FilterManager::remoteDecodeComplete).
type activityBody struct {
	io.ReadCloser
	st     *activeStream
	length int64
	read   int64
}

func (b *activityBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	if n > 0 || err != nil {
		notify(b.st.activity)
	}
	if err == io.EOF || (b.length >= 0 && b.read >= b.length) {
		b.st.remoteDone.Store(true)
	}
	return n, err
}

// remoteDoneFlag is FilterManager::remoteDecodeComplete for one pass.
type remoteDoneFlag = atomic.Bool
