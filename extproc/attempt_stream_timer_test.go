package extproc

import (
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/extproc/stream"
	"github.com/switchyard-gw/switchyard/internal/fakeclock"
)

// TestStreamTimerIsNotReArmedPerChunk: bytes arriving move the idle moment later, but the
// armed timer stays (no timer per chunk); when it fires early it re-arms at the new moment.
func TestStreamTimerIsNotReArmedPerChunk(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	fc := fakeclock.New(t0)
	p := &attemptProcessor{s: &Server{clock: fc}, phase: attemptPass,
		sse: &streamState{idle: time.Second, lastByte: t0, deadline: t0.Add(time.Hour)}}
	p.rearm()
	for i := 0; i < 5; i++ {
		fc.Advance(100 * time.Millisecond)
		p.sse.lastByte = fc.Now() // a chunk came in
		p.rearm()
	}
	if n := fc.Waiting(); n != 1 {
		t.Fatalf("%d timers armed after 5 chunks, want 1", n)
	}
	fc.Advance(500 * time.Millisecond) // the first timer (t0+1s) fires early
	select {
	case <-p.timerC():
	default:
		t.Fatal("the timer did not fire")
	}
	if err := p.onTimer(); err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(1500 * time.Millisecond); !p.sse.timerAt.Equal(want) || fc.Waiting() != 1 {
		t.Errorf("re-armed at %v (%d waiting), want %v", p.sse.timerAt, fc.Waiting(), want)
	}
}

// discardStream is an attempt stream whose answers go nowhere: what the attempt role
// allocates per chunk is then its own.
type discardStream struct {
	extprocv3.ExternalProcessor_ProcessServer
}

func (discardStream) Send(*extprocv3.ProcessingResponse) error { return nil }

// TestCommittedChunkAllocatesNothing: in a committed stream's steady state a chunk — parse,
// classify, the public model spliced in, the answer — allocates nothing in the attempt role
// (the answer is refilled, the timer kept, the output buffer reused).
func TestCommittedChunkAllocatesNothing(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	fc := fakeclock.New(t0)
	p := &attemptProcessor{s: &Server{clock: fc}, stream: discardStream{}, phase: attemptPass,
		sse: &streamState{idle: time.Minute, lastByte: t0, deadline: t0.Add(time.Hour), committed: true}}
	p.sse.cls.Reset(dialect.Chat, stream.Options{Model: "gpt-4o"})
	p.rearm()
	chunk := []byte(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}` + "\n\n")
	var err error
	allocs := testing.AllocsPerRun(200, func() { err = p.onStreamBody(chunk, false) })
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(string(chunk), `"gpt-4o-2024-08-06"`, `"gpt-4o"`, 1); string(p.sse.out) != want {
		t.Fatalf("passed on %q, want %q", p.sse.out, want)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per chunk, want 0", allocs)
	}
}
