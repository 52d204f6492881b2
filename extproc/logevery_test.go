package extproc

import (
	"testing"
	"time"
)

// TestLogEveryOneLinePerInterval: the first record goes through, the next ones within the
// interval are held back and counted in the next record that goes through.
func TestLogEveryOneLinePerInterval(t *testing.T) {
	var l logEvery
	t0 := time.Unix(1000, 0)
	if ok, held := l.allow(t0, 10*time.Second); !ok || held != 0 {
		t.Fatalf("first: %v %d", ok, held)
	}
	for i := range 5 {
		if ok, _ := l.allow(t0.Add(time.Duration(i+1)*time.Second), 10*time.Second); ok {
			t.Fatalf("record %d within the interval went through", i)
		}
	}
	if ok, held := l.allow(t0.Add(10*time.Second), 10*time.Second); !ok || held != 5 {
		t.Fatalf("after the interval: %v, held %d; want through with 5 held", ok, held)
	}
}
