package sim_test

import (
	"io"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	epv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func oneCluster(t *testing.T) (*upstream, string) {
	a := newUpstream(t, nil)
	return a, clusterYAML("a", "", []string{endpointYAML(a.addr(), "")})
}

// BUFFERED with headers SEND keeps content-length; a body mutation of the same
// length goes upstream with it, and header mutations in the body response apply
// because the headers are still held (processor_state.cc handleBufferedBodyCallback).
func TestBufferedBodyMutationKeepsContentLength(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, request_body_mode: BUFFERED, response_header_mode: SKIP")}, clusters: []string{ca}})
	res := e.do("POST", "/", "hello", "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	st.Send(t, reqHeadersResp(nil))
	st.Recv(t)
	c := common(setHeaders("x-from-body", "1"))
	c.BodyMutation = replaceBody("HELLO")
	st.Send(t, reqBodyResp(c))
	mustOK(t, await(t, res), 200)
	got := a.next(t)
	if got.Body != "HELLO" || got.Header.Get("Content-Length") != "5" || got.Header.Get("X-From-Body") != "1" {
		t.Fatalf("upstream got body %q headers %v", got.Body, got.Header)
	}
}

// A body of another length is fine when the same body response also sets
// content-length: header mutations apply before the length check.
func TestBufferedBodyMutationWithNewContentLength(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, request_body_mode: BUFFERED, response_header_mode: SKIP")}, clusters: []string{ca}})
	res := e.do("POST", "/", `{"model":"public"}`, "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	st.Send(t, reqHeadersResp(nil))
	st.Recv(t)
	c := common(setHeaders("content-length", "26"))
	c.BodyMutation = replaceBody(`{"model":"provider-model"}`)
	st.Send(t, reqBodyResp(c))
	mustOK(t, await(t, res), 200)
	if got := a.next(t); got.Body != `{"model":"provider-model"}` || got.Header.Get("Content-Length") != "26" {
		t.Fatalf("upstream got %q %v", got.Body, got.Header)
	}
}

// A mutated body whose length disagrees with the kept content-length is rejected with
// a local reply (validateContentLength → status_on_error, default 500).
func TestBufferedBodyContentLengthMismatch(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, request_body_mode: BUFFERED, response_header_mode: SKIP")}, clusters: []string{ca}})
	res := e.do("POST", "/", "hello", "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	st.Send(t, reqHeadersResp(nil))
	st.Recv(t)
	st.Send(t, reqBodyResp(&extprocv3.CommonResponse{BodyMutation: replaceBody("hi")}))
	mustOK(t, await(t, res), 500)
	if l := e.nextLog(); l.ResponseCodeDetails != "mismatch_between_content_length_and_the_length_of_the_mutated_body" {
		t.Fatalf("details %q", l.ResponseCodeDetails)
	}
	if err := st.WaitEnd(t); grpcCode(err) != "Canceled" {
		t.Fatalf("stream end %v", err)
	}
	a.none(t)
}

// BUFFERED over the buffer limit answers 413 (filter_manager.cc requestDataTooLarge):
// the body is held while the headers are with the server, so the router never starts.
func TestBufferedOverLimitIs413(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, bufferLimit: 1024,
		filters: []string{extProcYAML("r", "request_header_mode: SEND, request_body_mode: BUFFERED, response_header_mode: SKIP")}, clusters: []string{ca}})
	res := e.do("POST", "/", strings.Repeat("x", 4096), "X-Cluster", "a")
	st := ps.next(t, "r") // never answered: the buffer limit is hit first
	r := await(t, res)
	mustOK(t, r, 413)
	if r.body != "Payload Too Large" {
		t.Fatalf("body %q", r.body)
	}
	// The stream may be reset before the headers message even reached the server.
	if err := st.DrainUntilEnd(t); grpcCode(err) != "Canceled" {
		t.Fatalf("stream end %v", err)
	}
	a.none(t)
}

// STREAMED: chunks are sent as they arrive, each answered in order and replaced by its
// mutation; content-length is removed; header mutations in body responses are
// ignored (docs/design.md §6 item 5).
func TestStreamedBodyReplacesChunks(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, request_body_mode: STREAMED, response_header_mode: SKIP")}, clusters: []string{ca}})
	pr, pw := io.Pipe()
	res := e.doReader("POST", "/", pr, "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	st.Send(t, reqHeadersResp(nil))
	var seen string
	for _, part := range []string{"ab", "c"} {
		if _, err := pw.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
		m := st.Recv(t)
		b := m.GetRequestBody()
		seen += string(b.GetBody())
		c := common(setHeaders("x-ignored", "1"))
		c.BodyMutation = replaceBody(strings.ToUpper(string(b.GetBody())) + "!")
		st.Send(t, reqBodyResp(c))
	}
	_ = pw.Close()
	m := st.Recv(t) // the end of stream arrives as an empty chunk
	if !m.GetRequestBody().GetEndOfStream() || len(m.GetRequestBody().GetBody()) != 0 {
		t.Fatalf("last chunk %v", m)
	}
	st.Send(t, reqBodyResp(nil))
	mustOK(t, await(t, res), 200)
	got := a.next(t)
	if seen != "abc" || got.Body != "AB!C!" || got.Header.Get("X-Ignored") != "" {
		t.Fatalf("server saw %q; upstream got %q %v", seen, got.Body, got.Header)
	}
}

// CONTINUE_AND_REPLACE on request headers replaces the body, drops the original and
// removes content-length; nothing more is sent for the direction (docs/design.md §6 item 8).
func TestContinueAndReplace(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, request_body_mode: BUFFERED, response_header_mode: SKIP")}, clusters: []string{ca}})
	res := e.do("POST", "/", "original", "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	c := common(setHeaders(":method", "PUT"))
	c.Status = extprocv3.CommonResponse_CONTINUE_AND_REPLACE
	c.BodyMutation = replaceBody("replacement")
	st.Send(t, reqHeadersResp(c))
	mustOK(t, await(t, res), 200)
	got := a.next(t)
	if got.Body != "replacement" || got.Method != "PUT" {
		t.Fatalf("upstream got %s %q", got.Method, got.Body)
	}
}

// mode_override on a headers response (allow_mode_override): body mode taken
// literally, DEFAULT header modes unchanged (docs/design.md §6 item 10). Overriding to NONE means no
// body message is sent.
func TestModeOverride(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, request_body_mode: BUFFERED, response_header_mode: SEND", "allow_mode_override: true")}, clusters: []string{ca}})
	res := e.do("POST", "/", "body", "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	resp := reqHeadersResp(nil)
	resp.ModeOverride = &epv3.ProcessingMode{RequestBodyMode: epv3.ProcessingMode_NONE, ResponseHeaderMode: epv3.ProcessingMode_SKIP}
	st.Send(t, resp)
	mustOK(t, await(t, res), 200)
	if got := a.next(t); got.Body != "body" {
		t.Fatalf("upstream got %q", got.Body)
	}
	// No body message and no response headers message: the next event is the close.
	if err := st.WaitEnd(t); grpcCode(err) != "Canceled" {
		t.Fatalf("stream end %v", err)
	}
}

// BUFFERED_PARTIAL sends what it has at end of stream and applies the mutation.
func TestBufferedPartial(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, request_body_mode: BUFFERED_PARTIAL, response_header_mode: SKIP")}, clusters: []string{ca}})
	res := e.do("POST", "/", "partial", "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	st.Send(t, reqHeadersResp(nil))
	m := st.Recv(t)
	if string(m.GetRequestBody().GetBody()) != "partial" || !m.GetRequestBody().GetEndOfStream() {
		t.Fatalf("body message %v", m)
	}
	st.Send(t, reqBodyResp(&extprocv3.CommonResponse{BodyMutation: replaceBody("PARTIAL")}))
	mustOK(t, await(t, res), 200)
	if got := a.next(t); got.Body != "PARTIAL" {
		t.Fatalf("upstream got %q", got.Body)
	}
}

// Header mutation rules (docs/design.md §6 item 7): x-envoy-* needs allow_envoy, :authority needs
// allow_all_routing; denied mutations are ignored. Only raw_value is read, so a
// mutation that sets only `value` writes an empty header; append=true adds a value.
func TestForbiddenMutationsIgnored(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, response_header_mode: SKIP")}, clusters: []string{ca}})
	res := e.do("GET", "/", "", "X-Cluster", "a", "X-Multi", "one", "X-Gone", "1")
	st := ps.next(t, "r")
	if !st.Recv(t).GetRequestHeaders().GetEndOfStream() {
		t.Fatal("bodyless request: end_of_stream must be set on headers")
	}
	m := setHeaders("x-envoy-foo", "1", ":authority", "evil.example", "x-ok", "yes")
	m.SetHeaders = append(m.SetHeaders,
		&corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: "x-value-only", Value: "ignored"}},
		//lint:ignore SA1019 ext_proc honours only the deprecated append flag
		&corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: "x-multi", RawValue: []byte("two")}, Append: wrapperspb.Bool(true)},
		// append_action is ignored by ext_proc: default replace semantics apply.
		&corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: "x-ok", RawValue: []byte("yes2")}, AppendAction: corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD},
	)
	m.RemoveHeaders = []string{"x-gone", ":path"}
	st.Send(t, reqHeadersResp(common(m)))
	mustOK(t, await(t, res), 200)
	got := a.next(t)
	if got.Header.Get("X-Envoy-Foo") != "" || got.Host == "evil.example" || got.Header.Get("X-Ok") != "yes2" ||
		len(got.Header.Values("X-Ok")) != 1 || got.Header.Get("X-Gone") != "" || got.Path != "/" {
		t.Fatalf("upstream got host %q path %q headers %v", got.Host, got.Path, got.Header)
	}
	if v, ok := got.Header["X-Value-Only"]; !ok || v[0] != "" {
		t.Fatalf("x-value-only = %v, want present and empty", v)
	}
	if v := got.Header.Values("X-Multi"); len(v) != 2 {
		t.Fatalf("x-multi = %v, want two values", v)
	}
}

// With disallow_is_error a denied mutation is an error: local reply with
// status_on_error.
func TestForbiddenMutationIsError(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, response_header_mode: SKIP",
		"mutation_rules: {disallow_is_error: true}", "status_on_error: {code: 503}")}, clusters: []string{ca}})
	res := e.do("GET", "/", "", "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	st.Send(t, reqHeadersResp(common(setHeaders("x-envoy-upstream-rq-timeout-ms", "5"))))
	mustOK(t, await(t, res), 503)
	if l := e.nextLog(); l.ResponseCodeDetails != "Invalid_attempt_to_modify_x-envoy-upstream-rq-timeout-ms" {
		t.Fatalf("details %q", l.ResponseCodeDetails)
	}
	a.none(t)
}

// mode_override outside allowed_override_modes is ignored: the body is still sent.
func TestModeOverrideNotAllowed(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, request_body_mode: BUFFERED, response_header_mode: SKIP",
		"allow_mode_override: true", "allowed_override_modes: [{request_body_mode: STREAMED, response_header_mode: SKIP}]")}, clusters: []string{ca}})
	res := e.do("POST", "/", "body", "X-Cluster", "a")
	st := ps.next(t, "r")
	st.Recv(t)
	resp := reqHeadersResp(nil)
	resp.ModeOverride = &epv3.ProcessingMode{RequestBodyMode: epv3.ProcessingMode_NONE, ResponseHeaderMode: epv3.ProcessingMode_SKIP}
	st.Send(t, resp)
	m := st.Recv(t)
	if string(m.GetRequestBody().GetBody()) != "body" {
		t.Fatalf("override applied: %v", m)
	}
	st.Send(t, reqBodyResp(nil))
	mustOK(t, await(t, res), 200)
	a.next(t)
}

// CONTINUE_AND_REPLACE with a body on a bodyless request (a GET made a POST): the
// replacement becomes the filter manager's buffered body, so the headers continue
// without end_stream and the upstream receives the body (processor_state.cc
// handleHeadersResponse: addBufferedData when there is no buffered data). Both a
// downstream and an upstream (per-attempt) ext_proc.
func TestContinueAndReplaceAddsBodyToBodylessRequest(t *testing.T) {
	for _, upstreamFilter := range []bool{false, true} {
		name := "downstream"
		if upstreamFilter {
			name = "upstream"
		}
		t.Run(name, func(t *testing.T) {
			ps := newProcServer(t)
			a := newUpstream(t, nil)
			f := extProcYAML("r", "request_header_mode: SEND, response_header_mode: SKIP")
			c := cfg{procAddr: ps.addr}
			if upstreamFilter {
				c.clusters = []string{clusterYAML("a", upstreamFiltersYAML(f), []string{endpointYAML(a.addr(), "")})}
			} else {
				c.filters = []string{f}
				c.clusters = []string{clusterYAML("a", "", []string{endpointYAML(a.addr(), "")})}
			}
			e := start(t, c)
			res := e.do("GET", "/", "", "X-Cluster", "a")
			st := ps.next(t, "r")
			if m := st.Recv(t); !m.GetRequestHeaders().GetEndOfStream() {
				t.Fatalf("request headers should end the stream: %v", m)
			}
			cr := common(setHeaders(":method", "POST", "content-type", "application/json"))
			cr.Status = extprocv3.CommonResponse_CONTINUE_AND_REPLACE
			cr.BodyMutation = replaceBody(`{"q":1}`)
			st.Send(t, reqHeadersResp(cr))
			mustOK(t, await(t, res), 200)
			got := a.next(t)
			if got.Method != "POST" || got.Body != `{"q":1}` || got.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("upstream got %s %q %v", got.Method, got.Body, got.Header)
			}
		})
	}
}

// An empty name in remove_headers passes HeaderUtility::headerNameIsValid (nothing
// invalid in an empty string) and removes nothing (mutation_utils.cc
// applyHeaderMutations): the request goes on, other removals apply.
func TestEmptyRemoveHeaderIgnored(t *testing.T) {
	ps := newProcServer(t)
	a, ca := oneCluster(t)
	e := start(t, cfg{procAddr: ps.addr, filters: []string{extProcYAML("r", "request_header_mode: SEND, response_header_mode: SKIP")}, clusters: []string{ca}})
	res := e.do("GET", "/", "", "X-Cluster", "a", "X-Drop", "1", "X-Keep", "1")
	st := ps.next(t, "r")
	st.Recv(t)
	m := setHeaders("x-set", "1")
	m.RemoveHeaders = []string{"", "x-drop"}
	st.Send(t, reqHeadersResp(common(m)))
	mustOK(t, await(t, res), 200)
	got := a.next(t)
	if got.Header.Get("X-Drop") != "" || got.Header.Get("X-Keep") != "1" || got.Header.Get("X-Set") != "1" {
		t.Fatalf("upstream headers %v", got.Header)
	}
}
