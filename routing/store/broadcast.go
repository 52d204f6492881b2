package store

import (
	"context"
	"sync"
)

// Broadcaster fans out version changes. Each channel has room for one value; a newer version
// replaces an unread older one, so slow receivers see the latest version, never a stale one.
// A channel added after a Notify starts with the latest version: a store's watcher goroutine
// delivers the version it finds when it starts, which may come before the Add that asked
// for it. Config stores use it to implement WatchConfig. The zero value is ready to use.
type Broadcaster struct {
	mu     sync.Mutex
	chans  map[chan uint64]struct{}
	last   uint64 // the latest version notified; 0 before any
	closed bool
	done   chan struct{} // closed by Close, so Add's goroutines end with the broadcaster
}

// Add returns a channel of versions that closes when ctx is done or the broadcaster closes.
func (w *Broadcaster) Add(ctx context.Context) <-chan uint64 {
	ch := make(chan uint64, 1)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		close(ch)
		return ch
	}
	if w.chans == nil {
		w.chans = make(map[chan uint64]struct{})
		w.done = make(chan struct{})
	}
	w.chans[ch] = struct{}{}
	if w.last > 0 {
		ch <- w.last
	}
	done := w.done
	w.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, ok := w.chans[ch]; ok {
			delete(w.chans, ch)
			close(ch)
		}
	}()
	return ch
}

// Notify delivers v to every channel.
func (w *Broadcaster) Notify(v uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = v
	for ch := range w.chans {
		select {
		case <-ch: // drop the older, unread version
		default:
		}
		ch <- v
	}
}

// Close closes every channel; later Adds get a closed channel.
func (w *Broadcaster) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	if w.done != nil {
		close(w.done)
	}
	for ch := range w.chans {
		delete(w.chans, ch)
		close(ch)
	}
}
