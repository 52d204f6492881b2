package store

import (
	"testing"
)

// A channel added after a Notify starts with the latest version (a watcher registered after
// its store's first delivery would otherwise miss it until the next change); one added
// before any Notify starts empty.
func TestBroadcasterLateAddGetsTheLatestVersion(t *testing.T) {
	var b Broadcaster
	t.Cleanup(b.Close)
	early := b.Add(t.Context())
	select {
	case v := <-early:
		t.Fatalf("a version (%d) before any Notify", v)
	default:
	}
	b.Notify(3)
	b.Notify(5)
	if v := <-early; v != 5 {
		t.Fatalf("early watcher got %d, want the latest, 5", v)
	}
	late := b.Add(t.Context())
	select {
	case v := <-late:
		if v != 5 {
			t.Fatalf("late watcher got %d, want 5", v)
		}
	default:
		t.Fatal("a watcher added after Notify(5) got nothing")
	}
}
