package config

import (
	"sync"
	"testing"
)

// Changed wakes every waiter at each change, Store or a newer Reload's swap, and a change
// made between taking the channel and loading is not missed.
func TestLiveChanged(t *testing.T) {
	l := NewLive(&Snapshot{Version: 1})
	c := l.Changed()
	select {
	case <-c:
		t.Fatal("closed before any change")
	default:
	}
	if l.Changed() != c {
		t.Error("two waiters before a change got different channels")
	}
	l.Store(&Snapshot{Version: 2})
	select {
	case <-c:
	default:
		t.Fatal("Store did not announce the change")
	}
	c = l.Changed()
	l.swapNewer(&Snapshot{Version: 2}) // not newer: no change
	select {
	case <-c:
		t.Fatal("a refused swap announced a change")
	default:
	}
	l.swapNewer(&Snapshot{Version: 3})
	select {
	case <-c:
	default:
		t.Fatal("a newer swap did not announce the change")
	}
	// Concurrent writers and waiters (run with -race).
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				_ = l.Changed()
				l.swapNewer(&Snapshot{Version: uint64(4 + i*100 + j)})
			}
		})
	}
	done := make(chan struct{})
	go func() {
		for {
			c := l.Changed() // before Load, as Changed's contract says
			if l.Load().Version >= 703 {
				break
			}
			<-c
		}
		close(done)
	}()
	wg.Wait()
	l.Store(&Snapshot{Version: 1000})
	<-done
}
