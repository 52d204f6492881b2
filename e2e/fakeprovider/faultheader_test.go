package fakeprovider

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParseFaultHeader: the header syntax documented in README.md.
func TestParseFaultHeader(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []HeaderFault
		err  string
	}{
		{in: []string{"overloaded"}, want: []HeaderFault{{Fault: Fault{Error: Overloaded}, Spec: "overloaded"}}},
		{in: []string{"server=primary; error=rate_limit; retry-after=2; retry-after-ms=1500; times=1"},
			want: []HeaderFault{{Fault: Fault{Error: RateLimited, RetryAfter: "2", RetryAfterMS: "1500", Times: 1},
				Server: "primary", Counted: true, Spec: "server=primary; error=rate_limit; retry-after=2; retry-after-ms=1500; times=1"}}},
		{in: []string{"end=error;after=3;error=context_overflow;path=/v1/responses;model=gpt-5"},
			want: []HeaderFault{{Fault: Fault{End: EndError, EndAfter: 3, Error: ContextOverflow, Path: "/v1/responses", Model: "gpt-5"},
				Spec: "end=error;after=3;error=context_overflow;path=/v1/responses;model=gpt-5"}}},
		{in: []string{"stall=2s; stall-after=1; keepalive=250ms; header-delay=1s; first-byte=100ms; usage=off"},
			want: []HeaderFault{{Fault: Fault{Stall: 2 * time.Second, StallAfter: 1, Keepalive: 250 * time.Millisecond,
				HeaderDelay: time.Second, FirstByteDelay: 100 * time.Millisecond, Usage: UsageOff},
				Spec: "stall=2s; stall-after=1; keepalive=250ms; header-delay=1s; first-byte=100ms; usage=off"}}},
		{in: []string{"status=418; message=a%3Bb%2Cc; header=x-a:1; header=X-B: 2; text=hi%20there; chunks=2; prompt-tokens=5"},
			want: []HeaderFault{{Fault: Fault{Status: 418, Message: "a;b,c", Header: http.Header{"X-A": {"1"}, "X-B": {"2"}},
				Content: &Content{Text: "hi there", Chunks: 2, PromptTokens: 5}},
				Spec: "status=418; message=a%3Bb%2Cc; header=x-a:1; header=X-B: 2; text=hi%20there; chunks=2; prompt-tokens=5"}}},
		// A proxy may merge repeated headers into one comma list.
		{in: []string{"reset; after=1, server=b; nodone", "filtered"},
			want: []HeaderFault{
				{Fault: Fault{End: EndReset, EndAfter: 1}, Spec: "reset; after=1"},
				{Fault: Fault{End: EndNoDone}, Server: "b", Spec: "server=b; nodone"},
				{Fault: Fault{End: EndFiltered}, Spec: "filtered"}}},
		{in: []string{"nostop; tiny-writes", "end=nostop"},
			want: []HeaderFault{
				{Fault: Fault{End: EndNoStopReason, TinyWrites: true}, Spec: "nostop; tiny-writes"},
				{Fault: Fault{End: EndNoStopReason}, Spec: "end=nostop"}}},
		{in: []string{"bogus=1"}, err: "unknown key"},
		{in: []string{"error=nope"}, err: "unknown error kind"},
		{in: []string{"stall=soon"}, err: "stall"},
		{in: []string{"times=0"}, err: "at least 1"},
		{in: []string{"keepalive=-1s"}, err: "negative"},
		{in: []string{"usage=maybe"}, err: "on or off"},
		{in: []string{"whatever"}, err: "unknown item"},
	} {
		got, err := ParseFaultHeader(tc.in...)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", tc.in, got, tc.want)
		}
	}
}

// TestHeaderFaultTargeting: one header sent to two fakes (as a gateway failing over would)
// applies only to the fake it names, and times=1 lets the retry through.
func TestHeaderFaultTargeting(t *testing.T) {
	primary, pbase := start(t, Options{Kind: OpenAI, Name: "primary"})
	_, sbase := start(t, Options{Kind: OpenAI, Name: "secondary"})
	hdr := map[string]string{FaultHeader: "server=primary; overloaded; times=1"}
	status := func(base string) int {
		res := post(t, nil, base+"/v1/chat/completions", `{"model":"m","messages":[]}`, hdr)
		res.Body.Close()
		return res.StatusCode
	}
	if got := []int{status(pbase), status(sbase), status(pbase)}; !reflect.DeepEqual(got, []int{503, 200, 200}) {
		t.Errorf("statuses %v, want [503 200 200]", got)
	}
	if reqs := primary.Requests(); reqs[0].Fault == nil || reqs[1].Fault != nil {
		t.Errorf("faults recorded: %+v, %+v", reqs[0].Fault, reqs[1].Fault)
	}
}

// TestMalformedFaultHeader: a header the fake cannot parse is a test bug, answered with a
// provider-shaped 400 that names the problem.
func TestMalformedFaultHeader(t *testing.T) {
	_, base := start(t, Options{Kind: Anthropic})
	res := post(t, nil, base+"/v1/messages", `{"model":"c","max_tokens":1,"messages":[]}`,
		map[string]string{"anthropic-version": "2023-06-01", FaultHeader: "stall=forever"})
	if b := readAll(t, res); res.StatusCode != 400 || !strings.Contains(string(b), "fakeprovider: x-fake-fault") {
		t.Errorf("status %d body %s", res.StatusCode, b)
	}
}
