package store

import (
	"context"
	"sync"
)

// fanoutBuffer is how many undelivered ids a receiver of a Fanout may hold. Revocations are
// operator actions, far rarer than a receiver drains them.
const fanoutBuffer = 256

// Fanout delivers ids (revoked client keys) to every receiver. Unlike Broadcaster nothing is
// coalesced, since each id matters; an id for a receiver whose buffer is full is dropped,
// which WatchRevocations allows (receivers re-verify within a bound of their own). Stores use
// it to implement ClientKeys.WatchRevocations. The zero value is ready to use.
type Fanout struct {
	mu     sync.Mutex
	chans  map[chan string]struct{}
	closed bool
	done   chan struct{} // closed by Close, so Add's goroutines end with the fanout
}

// Add returns a channel of ids that closes when ctx is done or the fanout closes.
func (f *Fanout) Add(ctx context.Context) <-chan string {
	ch := make(chan string, fanoutBuffer)
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		close(ch)
		return ch
	}
	if f.chans == nil {
		f.chans = make(map[chan string]struct{})
		f.done = make(chan struct{})
	}
	f.chans[ch] = struct{}{}
	done := f.done
	f.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.chans[ch]; ok {
			delete(f.chans, ch)
			close(ch)
		}
	}()
	return ch
}

// Notify delivers id to every channel with room for it.
func (f *Fanout) Notify(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.chans {
		select {
		case ch <- id:
		default: // full: dropped, see the type's comment
		}
	}
}

// Close closes every channel; later Adds get a closed channel.
func (f *Fanout) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.closed = true
	if f.done != nil {
		close(f.done)
	}
	for ch := range f.chans {
		delete(f.chans, ch)
		close(ch)
	}
}
