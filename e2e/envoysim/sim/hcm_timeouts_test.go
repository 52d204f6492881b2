package sim_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// blockingUpstream answers after release is closed (headers first when
// headersFirst), so that only an HCM timer can end the stream.
func blockingUpstream(t *testing.T, headersFirst bool) *upstream {
	t.Helper()
	release := make(chan struct{})
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ *recorded) {
		if headersFirst {
			w.WriteHeader(200)
			_, _ = io.WriteString(w, "head-")
			w.(http.Flusher).Flush()
		}
		<-release
	})
	t.Cleanup(func() { close(release) }) // before the server's Close (cleanups run LIFO)
	return u
}

func timeoutEnv(t *testing.T, u *upstream, route string, hcm ...string) *env {
	t.Helper()
	return start(t, cfg{route: route, hcm: hcm, clusters: []string{clusterYAML("a", "", []string{endpointYAML(u.addr(), "")})}})
}

// stream_idle_timeout with the request complete and no response yet: a local reply
// with maybeRequestTimeoutCode → 504 "stream timeout", flag SI.
func TestStreamIdleTimeoutBeforeResponse(t *testing.T) {
	u := blockingUpstream(t, false)
	e := timeoutEnv(t, u, "timeout: 0s", "stream_idle_timeout: 0.3s")
	r := await(t, e.do("GET", "/", "", "X-Cluster", "a"))
	mustOK(t, r, 504)
	if r.body != "stream timeout" {
		t.Fatalf("body %q", r.body)
	}
	if l := e.nextLog(); !contains(l.ResponseFlags, "SI") || l.ResponseCodeDetails != "stream_idle_timeout" {
		t.Fatalf("access log %+v", l)
	}
}

// With the request body still open, the same timeout answers 408.
func TestStreamIdleTimeoutRequestIncomplete(t *testing.T) {
	u := blockingUpstream(t, false)
	e := timeoutEnv(t, u, "timeout: 0s", "stream_idle_timeout: 0.3s")
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	ch := e.doReader("POST", "/", pr, "X-Cluster", "a")
	if _, err := pw.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	r := await(t, ch)
	mustOK(t, r, 408)
	if r.body != "stream timeout" {
		t.Fatalf("body %q", r.body)
	}
}

// After response headers the idle timeout resets the stream.
func TestStreamIdleTimeoutAfterResponseHeaders(t *testing.T) {
	u := blockingUpstream(t, true)
	e := timeoutEnv(t, u, "timeout: 0s", "stream_idle_timeout: 0.3s")
	r := await(t, e.do("GET", "/", "", "X-Cluster", "a"))
	if r.err == nil {
		t.Fatalf("stream completed: %d %q", r.resp.StatusCode, r.body)
	}
	if l := e.nextLog(); !l.DownstreamReset || !contains(l.ResponseFlags, "SI") || l.ResponseCode != 200 {
		t.Fatalf("access log %+v", l)
	}
}

// Encode events reset the idle timer: a response that keeps streaming outlives it.
func TestStreamIdleTimeoutResetByActivity(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ *recorded) {
		// Upstream pacing: each gap is a twelfth of the idle timeout (room for a machine
		// loaded by other test binaries), the whole response 1.3 times it.
		for range 16 {
			_, _ = io.WriteString(w, "x")
			w.(http.Flusher).Flush()
			time.Sleep(250 * time.Millisecond)
		}
	})
	e := timeoutEnv(t, u, "timeout: 0s", "stream_idle_timeout: 3s")
	r := await(t, e.do("GET", "/", "", "X-Cluster", "a"))
	mustOK(t, r, 200)
	if r.body != strings.Repeat("x", 16) {
		t.Fatalf("body %q", r.body)
	}
}

// RouteAction.idle_timeout overrides stream_idle_timeout once the route is known, and
// 0 disables it (ActiveStream::refreshIdleTimeout).
func TestRouteIdleTimeoutOverride(t *testing.T) {
	u := blockingUpstream(t, false)
	e := timeoutEnv(t, u, "timeout: 0s, idle_timeout: 0.3s", "stream_idle_timeout: 60s")
	r := await(t, e.do("GET", "/", "", "X-Cluster", "a"))
	mustOK(t, r, 504)
	if l := e.nextLog(); !contains(l.ResponseFlags, "SI") {
		t.Fatalf("access log %+v", l)
	}

	slow := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ *recorded) {
		time.Sleep(600 * time.Millisecond) // longer than the HCM's 300 ms
		_, _ = io.WriteString(w, "late")
	})
	e2 := timeoutEnv(t, slow, "timeout: 0s, idle_timeout: 0s", "stream_idle_timeout: 0.3s")
	r = await(t, e2.do("GET", "/", "", "X-Cluster", "a"))
	mustOK(t, r, 200)
	if r.body != "late" {
		t.Fatalf("body %q", r.body)
	}
}

// request_timeout: 408 "request timeout" while the request is incomplete; disarmed
// once the whole request passed the decoder filters.
func TestRequestTimeout(t *testing.T) {
	u := blockingUpstream(t, false)
	e := timeoutEnv(t, u, "timeout: 0s", "request_timeout: 0.3s")
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	ch := e.doReader("POST", "/", pr, "X-Cluster", "a")
	if _, err := pw.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	r := await(t, ch)
	mustOK(t, r, 408)
	if r.body != "request timeout" {
		t.Fatalf("body %q", r.body)
	}
	if l := e.nextLog(); l.ResponseCodeDetails != "request_overall_timeout" {
		t.Fatalf("access log %+v", l)
	}

	slow := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ *recorded) {
		time.Sleep(600 * time.Millisecond) // longer than request_timeout, after the request ended
		_, _ = io.WriteString(w, "late")
	})
	e2 := timeoutEnv(t, slow, "timeout: 0s", "request_timeout: 0.3s")
	r = await(t, e2.do("POST", "/", "complete body", "X-Cluster", "a"))
	mustOK(t, r, 200)
}

// common_http_protocol_options.max_stream_duration bounds the whole stream even while
// data flows; after the response started it is a reset.
func TestMaxStreamDuration(t *testing.T) {
	stop := make(chan struct{})
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ *recorded) {
		for {
			select {
			case <-stop:
				return
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond): // upstream pacing
			}
			_, _ = io.WriteString(w, "x")
			w.(http.Flusher).Flush()
		}
	})
	t.Cleanup(func() { close(stop) })
	e := timeoutEnv(t, u, "timeout: 0s", "common_http_protocol_options: {max_stream_duration: 0.3s}")
	r := await(t, e.do("GET", "/", "", "X-Cluster", "a"))
	if r.err == nil {
		t.Fatalf("stream completed: %q", r.body)
	}
	if l := e.nextLog(); !l.DownstreamReset || l.ResponseCodeDetails != "max_duration_timeout" {
		t.Fatalf("access log %+v", l)
	}
}
