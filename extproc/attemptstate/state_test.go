package attemptstate

import (
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"

	statev1 "github.com/switchyard-gw/switchyard/proto/switchyard/state/v1"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
	"github.com/switchyard-gw/switchyard/routing/failure"
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

func TestHistoryRoundTrip(t *testing.T) {
	req := routing.Request{ID: "req-1", Model: "gpt-4o", Operation: config.OpVideoDownload, Stream: true, Start: t0}
	st := newState(&req, statev1.Dialect_DIALECT_OPENAI_CHAT, t0.Add(time.Hour))
	gotReq, err := requestOf(st)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotReq, req) {
		t.Errorf("request %+v, want %+v", gotReq, req)
	}

	h := &routing.History{
		Attempts: []routing.Attempt{
			{Deployment: "a", Model: "gpt-4o", Class: failure.ClassThrottle, Kind: failure.KindRateLimit, Quota: true, Status: 429,
				RetryAfter: 1500 * time.Millisecond, Latency: 42 * time.Millisecond, Type: "insufficient_quota", Code: "insufficient_quota", Message: "You exceeded your current quota."},
			{Deployment: "b", Model: "gpt-4o-mini", Class: failure.ClassRequest, Kind: failure.KindContextOverflow, Status: 400, Latency: time.Second},
		},
		Reason:     config.ReasonContextWindow,
		ReasonFrom: "gpt-4o-mini",
		Skips:      []routing.Skip{{Deployment: "c", Model: "gpt-4o", Why: "tools not supported"}, {Model: "o1", Why: "streaming not supported"}},
	}
	putHistory(st, h)
	got, err := historyOf(st)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, h) {
		t.Errorf("history\n%+v\nwant\n%+v", got, h)
	}
	if h0, err := historyOf(newState(&req, 0, t0)); err != nil || len(h0.Attempts) != 0 || h0.Reason != config.ReasonGeneral {
		t.Errorf("history of a new state: %+v, %v", h0, err)
	}
}

func TestBeginFinishAttempt(t *testing.T) {
	req := routing.Request{ID: "req-1", Model: "gpt-4o", Start: t0}
	st := newState(&req, statev1.Dialect_DIALECT_ANTHROPIC_MESSAGES, t0.Add(time.Hour))
	d := routing.Decision{
		Move: routing.MoveFallback, Deployment: &config.Deployment{ID: "claude"}, Model: "claude-sonnet-4",
		Reason: config.ReasonContentPolicy, Probe: true, Skips: []routing.Skip{{Deployment: "x", Model: "gpt-4o", Why: "no"}},
	}
	beginAttempt(st, &d, "req-1-1", t0.Add(time.Second), 2)
	cur := st.GetCurrent()
	if cur.GetDeploymentId() != "claude" || cur.GetModel() != "claude-sonnet-4" || cur.GetAttemptId() != "req-1-1" ||
		cur.GetStartUnixNano() != t0.Add(time.Second).UnixNano() {
		t.Errorf("current %v", cur)
	}
	if cur.GetMove() != statev1.Move_MOVE_FALLBACK || cur.GetFallbackReason() != statev1.FallbackReason_FALLBACK_REASON_CONTENT_POLICY ||
		cur.GetFallbackHop() != 2 || !cur.GetProbe() {
		t.Errorf("current attempt chosen as %v", cur)
	}

	a := routing.Attempt{Deployment: "claude", Model: "claude-sonnet-4", Class: failure.ClassTransient, Kind: failure.KindOverloaded, Status: 529}
	finishAttempt(st, &a)
	if st.GetCurrent() != nil {
		t.Error("current attempt not cleared")
	}
	h, err := historyOf(st)
	if err != nil {
		t.Fatal(err)
	}
	want := &routing.History{Attempts: []routing.Attempt{a}, Reason: config.ReasonContentPolicy, Skips: d.Skips}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("history %+v, want %+v", h, want)
	}
	if a := st.GetAttempts()[0]; a.GetMove() != statev1.Move_MOVE_FALLBACK || a.GetFallbackReason() != statev1.FallbackReason_FALLBACK_REASON_CONTENT_POLICY ||
		a.GetFallbackHop() != 2 || !a.GetProbe() {
		t.Errorf("the finished attempt lost how it was chosen: %v", a)
	}

	// putHistory keeps how the recorded attempts were chosen; a new one takes the current's.
	beginAttempt(st, &routing.Decision{Move: routing.MoveRetry, Deployment: &config.Deployment{ID: "d"}}, "req-1-2", t0, 0)
	h.Attempts = append(h.Attempts, routing.Attempt{Deployment: "d", Class: failure.ClassNone, Status: 200})
	putHistory(st, h)
	if a := st.GetAttempts()[0]; a.GetFallbackHop() != 2 || a.GetMove() != statev1.Move_MOVE_FALLBACK {
		t.Errorf("putHistory changed how attempt 1 was chosen: %v", a)
	}
	if a := st.GetAttempts()[1]; a.GetMove() != statev1.Move_MOVE_RETRY {
		t.Errorf("putHistory: attempt 2 not chosen as the current attempt: %v", a)
	}
}

func TestHistoryOfRejectsOutOfRange(t *testing.T) {
	req := routing.Request{ID: "r", Model: "m", Start: t0}
	for name, mutate := range map[string]func(*statev1.State){
		"class unspecified": func(s *statev1.State) { s.Attempts = []*statev1.Attempt{{}} },
		"class unknown":     func(s *statev1.State) { s.Attempts = []*statev1.Attempt{{Class: 99}} },
		"reason":            func(s *statev1.State) { s.Reason = 0 },
	} {
		st := newState(&req, 0, t0)
		mutate(st)
		if _, err := historyOf(st); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, mutate := range map[string]func(*statev1.State){
		"operation": func(s *statev1.State) { s.Operation = 0 },
		"mode":      func(s *statev1.State) { s.Mode = 7 },
	} {
		st := newState(&req, 0, t0)
		mutate(st)
		if _, err := requestOf(st); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSaveHeader(t *testing.T) {
	st := &statev1.State{}
	saveHeader(st, "Authorization", []byte("Bearer a"), true)
	saveHeader(st, "authorization", []byte("Bearer rewritten"), true) // the first value wins
	saveHeader(st, "api-key", nil, false)
	saveHeader(st, "content-length", nil, true)
	if v, present, saved := savedHeader(st, "AUTHORIZATION"); !saved || !present || string(v) != "Bearer a" {
		t.Errorf("authorization: %q %v %v", v, present, saved)
	}
	if _, present, saved := savedHeader(st, "api-key"); !saved || present {
		t.Errorf("api-key: present %v saved %v, want saved absent", present, saved)
	}
	if v, present, saved := savedHeader(st, "content-length"); !saved || !present || len(v) != 0 {
		t.Errorf("content-length: %q %v %v, want saved, present, empty", v, present, saved)
	}
	if _, _, saved := savedHeader(st, "x-api-key"); saved {
		t.Error("x-api-key saved without saveHeader")
	}
	if len(st.ClientHeaders) != 3 {
		t.Errorf("%d headers saved, want 3", len(st.ClientHeaders))
	}
}

// finishAttempt appends a as the outcome of the attempt under way in st and clears it: a
// fixture for a state with a finished attempt (production records through recordAttempt).
func finishAttempt(st *statev1.State, a *routing.Attempt) {
	p := attemptProto(a)
	chosenAs(p, st.GetCurrent())
	st.Attempts = append(st.Attempts, p)
	st.Current = nil
}
