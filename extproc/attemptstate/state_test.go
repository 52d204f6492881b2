package attemptstate

import (
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/internal/fakeclock"
	statev1 "github.com/switchyard-gw/switchyard/proto/switchyard/state/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
	"github.com/switchyard-gw/switchyard/routing/store"
)

// upperSnake turns "videoDownload" or "context_window" into "VIDEO_DOWNLOAD" / "CONTEXT_WINDOW".
func upperSnake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// The proto enums mirror the routing enums value for value (proto = routing + 1); a value
// added to one side only fails here.
func TestEnumsMirrorRouting(t *testing.T) {
	check := func(what string, names map[int32]string, prefix string, n int, str func(int) string) {
		t.Helper()
		if len(names) != n+1 {
			t.Errorf("%s: the proto has %d values besides unspecified, routing %d", what, len(names)-1, n)
		}
		for i := range n {
			if got, want := names[int32(i+1)], prefix+upperSnake(str(i)); got != want {
				t.Errorf("%s %d (%s): proto value %d is %q, want %q", what, i, str(i), i+1, got, want)
			}
		}
	}
	check("class", statev1.Class_name, "CLASS_", int(failure.ClassIncompatible)+1, func(i int) string { return failure.Class(i).String() })
	check("operation", statev1.Operation_name, "OPERATION_", len(config.Operations()), func(i int) string { return config.Operation(i).String() })
	check("mode", statev1.Mode_name, "MODE_", 2, func(i int) string { return config.Mode(i).String() })
	check("move", statev1.Move_name, "MOVE_", int(routing.MoveFallback)+1, func(i int) string { return routing.Move(i).String() })
	check("reason", statev1.FallbackReason_name, "FALLBACK_REASON_", int(config.ReasonContentPolicy)+1, func(i int) string { return config.Reason(i).String() })
}

func TestRequestRoundTrip(t *testing.T) {
	req := routing.Request{ID: "req-1", Model: "gpt-4o", Operation: config.OpVideoDownload, Stream: true, Start: t0, Models: []string{"gpt-4o", "backup"}}
	st := New(&req, dialect.Messages, t0.Add(time.Hour))
	gotReq, err := st.Request()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotReq, req) {
		t.Errorf("request %+v, want %+v", gotReq, req)
	}
	if st.Dialect() != dialect.Messages || !st.Deadline().Equal(t0.Add(time.Hour)) || st.PublicModel() != "gpt-4o" {
		t.Errorf("dialect %v deadline %v model %q", st.Dialect(), st.Deadline(), st.PublicModel())
	}
	if h0, err := New(&req, dialect.Chat, t0).History(); err != nil || len(h0.Attempts) != 0 || h0.Reason != config.ReasonGeneral {
		t.Errorf("history of a new state: %+v, %v", h0, err)
	}
}

// The history survives seal and open across attempts: every finished attempt keeps how it
// was chosen and its whole outcome (quota, Retry-After, the provider's error), the skips
// accumulate, and the fallback chain is the last attempt's.
func TestHistoryRoundTrip(t *testing.T) {
	clock := fakeclock.New(t0)
	s := newTestSealer(t, Keys{Current: testKey(1)}, clock)
	req := routing.Request{ID: "req-1", Model: "gpt-4o", Start: t0}
	st := New(&req, dialect.Chat, t0.Add(time.Hour))
	reseal := func() {
		t.Helper()
		sealed, err := s.Seal(st)
		if err != nil {
			t.Fatal(err)
		}
		if st, err = s.Open(sealed, req.ID); err != nil {
			t.Fatal(err)
		}
	}
	d1 := routing.Decision{Move: routing.MoveFirst, Deployment: &config.Deployment{ID: "a"}, Model: "gpt-4o", Reason: config.ReasonGeneral,
		Pick: routing.PickStrategy, Skips: []routing.Skip{{Deployment: "c", Model: "gpt-4o", Cause: routing.SkipCapability, Why: "tools not supported"}}}
	c1 := failure.Classification{Class: failure.ClassThrottle, Kind: failure.KindRateLimit, Quota: true, Status: 429,
		RetryAfter: 1500 * time.Millisecond, Type: "insufficient_quota", Code: "insufficient_quota", Message: "You exceeded your current quota."}
	d2 := routing.Decision{Move: routing.MoveFallback, Deployment: &config.Deployment{ID: "b"}, Model: "gpt-4o-mini", Reason: config.ReasonContextWindow,
		ReasonFrom: "gpt-4o", Pick: routing.PickSingle, AllOpenTry: true, FallbackHop: 1,
		Skips: []routing.Skip{{Model: "o1", Cause: routing.SkipUnserved, Why: "no deployments serve this model"}}}
	c2 := failure.Classification{Class: failure.ClassRequest, Kind: failure.KindContextOverflow, Status: 400}

	st.Begin(&d1, "req-1-1", t0)
	reseal()
	if _, err := st.Finish(c1, 42*time.Millisecond, ""); err != nil {
		t.Fatal(err)
	}
	reseal()
	st.Redirect()
	st.Begin(&d2, "req-1-2", t0.Add(time.Second))
	reseal()
	if _, err := st.Finish(c2, time.Second, "req_2"); err != nil {
		t.Fatal(err)
	}
	reseal()

	a1, a2 := d1.Attempt(), d2.Attempt()
	a1.Finish(c1, 42*time.Millisecond)
	a2.Finish(c2, time.Second)
	a2.ProviderRequestID = "req_2"
	a2.ReasonFrom = "" // the request's, not each attempt's: History.ReasonFrom
	want := &routing.History{
		Attempts:   []routing.Attempt{a1, a2},
		Reason:     config.ReasonContextWindow,
		ReasonFrom: "gpt-4o",
		Skips:      append(append([]routing.Skip(nil), d1.Skips...), d2.Skips...),
	}
	h, err := st.History()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("history\n%+v\nwant\n%+v", h, want)
	}
	if st.Redirects() != 1 || st.Attempts() != 2 {
		t.Errorf("%d redirects, %d attempts; want 1, 2", st.Redirects(), st.Attempts())
	}
	if _, ok := st.Current(); ok {
		t.Error("an attempt under way after the last Finish")
	}
}

// Begin and Finish carry how the router chose an attempt and what became of it into the
// history the next decision reads, and into the record of every attempt.
func TestBeginFinishAttempt(t *testing.T) {
	req := routing.Request{ID: "req-1", Model: "gpt-4o", Start: t0}
	st := New(&req, dialect.Messages, t0.Add(time.Hour))
	d := routing.Decision{
		Move: routing.MoveFallback, Deployment: &config.Deployment{ID: "claude"}, Model: "claude-sonnet-4",
		Reason: config.ReasonContentPolicy, ReasonFrom: "gpt-4o", Probe: true, Pick: routing.PickWeighted, FallbackHop: 2,
		Skips:    []routing.Skip{{Deployment: "x", Model: "gpt-4o", Why: "no", Cause: routing.SkipLimit}},
		Reserved: store.ReservedTokens{At: t0, Tokens: 42},
	}
	st.Begin(&d, "req-1-1", t0.Add(time.Second))
	cur, ok := st.Current()
	if !ok || cur.ID != "req-1-1" || !cur.Started.Equal(t0.Add(time.Second)) || cur.Reserved.Tokens != 42 || !cur.Reserved.At.Equal(t0) {
		t.Errorf("current %+v", cur)
	}
	if !reflect.DeepEqual(cur.Attempt, d.Attempt()) {
		t.Errorf("current attempt %+v, want the decision's %+v", cur.Attempt, d.Attempt())
	}

	c := failure.Classification{Class: failure.ClassTransient, Kind: failure.KindOverloaded, Status: 529, RetryAfter: 3 * time.Second,
		RetryAfterHeader: true, Type: "overloaded_error", Code: "busy", Message: "Overloaded"}
	if _, err := st.Finish(c, 700*time.Millisecond, "req_abc"); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Current(); ok {
		t.Error("current attempt not cleared")
	}
	if _, err := st.Finish(c, 0, ""); err == nil {
		t.Error("Finish without an attempt under way succeeded")
	}
	h, err := st.History()
	if err != nil {
		t.Fatal(err)
	}
	want := d.Attempt()
	want.Finish(c, 700*time.Millisecond)
	want.ProviderRequestID = "req_abc"
	want.ReasonFrom = "" // the request's, not each attempt's: History.ReasonFrom
	if len(h.Attempts) != 1 || !reflect.DeepEqual(h.Attempts[0], want) {
		t.Errorf("attempts %+v, want [%+v]", h.Attempts, want)
	}
	if h.Reason != config.ReasonContentPolicy || h.ReasonFrom != "gpt-4o" || !reflect.DeepEqual(h.Skips, d.Skips) {
		t.Errorf("history reason %v from %q skips %+v", h.Reason, h.ReasonFrom, h.Skips)
	}
	if st.Attempts() != 1 || !reflect.DeepEqual(st.Skips(), d.Skips) {
		t.Errorf("%d attempts, skips %+v", st.Attempts(), st.Skips())
	}
}

func TestHistoryRejectsOutOfRange(t *testing.T) {
	req := routing.Request{ID: "r", Model: "m", Start: t0}
	for name, mutate := range map[string]func(*statev1.State){
		"class unspecified": func(s *statev1.State) { s.Attempts = []*statev1.Attempt{{}} },
		"class unknown":     func(s *statev1.State) { s.Attempts = []*statev1.Attempt{{Class: 99}} },
		"reason":            func(s *statev1.State) { s.Reason = 0 },
	} {
		st := New(&req, dialect.Chat, t0)
		mutate(&st.m)
		if _, err := st.History(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, mutate := range map[string]func(*statev1.State){
		"operation": func(s *statev1.State) { s.Operation = 0 },
		"mode":      func(s *statev1.State) { s.Mode = 7 },
	} {
		st := New(&req, dialect.Chat, t0)
		mutate(&st.m)
		if _, err := st.Request(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSaveHeader(t *testing.T) {
	st := New(&routing.Request{ID: "r"}, dialect.Chat, t0)
	st.SaveHeader("Authorization", []byte("Bearer a"), true)
	st.SaveHeader("authorization", []byte("Bearer rewritten"), true) // the first value wins
	st.SaveHeader("api-key", nil, false)
	st.SaveHeader("content-length", nil, true)
	if v, present, saved := st.SavedHeader("AUTHORIZATION"); !saved || !present || string(v) != "Bearer a" {
		t.Errorf("authorization: %q %v %v", v, present, saved)
	}
	if _, present, saved := st.SavedHeader("api-key"); !saved || present {
		t.Errorf("api-key: present %v saved %v, want saved absent", present, saved)
	}
	if v, present, saved := st.SavedHeader("content-length"); !saved || !present || len(v) != 0 {
		t.Errorf("content-length: %q %v %v, want saved, present, empty", v, present, saved)
	}
	if _, _, saved := st.SavedHeader("x-api-key"); saved {
		t.Error("x-api-key saved without SaveHeader")
	}
	if len(st.m.ClientHeaders) != 3 {
		t.Errorf("%d headers saved, want 3", len(st.m.ClientHeaders))
	}
	st.SaveHeader(":scheme", []byte("https"), true)
	st.SaveHeader(":authority", []byte("gw.example"), true)
	st.SaveHeader(":path", []byte("/v1/messages?beta=true"), true)
	if u := st.OriginalURL(); u != "https://gw.example/v1/messages?beta=true" {
		t.Errorf("original URL %q", u)
	}
}
