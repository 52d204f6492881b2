package extproc

import (
	"testing"
	"time"

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
