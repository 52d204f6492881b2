package store_test

import (
	"context"
	"testing"

	"github.com/switchyard-gw/switchyard/routing/store"
)

// TestFanoutDeliversEveryIDAndNeverBlocks: every receiver gets every id in order; a full
// receiver loses ids instead of blocking the notifier; channels close with their context
// and with the fanout.
func TestFanoutDeliversEveryIDAndNeverBlocks(t *testing.T) {
	var f store.Fanout
	ctx, cancel := context.WithCancel(t.Context())
	a, b := f.Add(ctx), f.Add(t.Context())
	f.Notify("k1")
	f.Notify("k2")
	for _, ch := range []<-chan string{a, b} {
		if x, y := <-ch, <-ch; x != "k1" || y != "k2" {
			t.Fatalf("got %q, %q; want k1, k2", x, y)
		}
	}
	for range 10000 { // far past the buffer, nobody reading: must return
		f.Notify("flood")
	}
	cancel()
	for range a { // drains what was buffered, then closes
	}
	f.Close()
	for range b {
	}
	if _, ok := <-f.Add(t.Context()); ok {
		t.Fatal("Add after Close returned an open channel")
	}
}
