package extproc

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/switchyard-gw/switchyard/extproc/attemptstate"
	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/routing"
)

func TestRefused(t *testing.T) {
	v := func(s string) *string { return &s }
	for _, tc := range []struct {
		rules mutationRules
		name  string
		value *string
		want  bool // refused
	}{
		{attemptRules, ":authority", v("api.openai.com"), false},
		{routeRules, ":authority", v("api.openai.com"), true},
		{attemptRules, ":path", v("/v1/chat/completions"), false},
		{attemptRules, ":path", v("v1"), true},
		{attemptRules, ":status", v("307"), false},
		{attemptRules, ":status", v("100"), true},
		{attemptRules, ":status", nil, true},
		{attemptRules, "host", nil, true},
		{attemptRules, "x-envoy-upstream-rq-timeout-ms", v("5"), true},
		{routeRules, "x-envoy-upstream-rq-timeout-ms", v("5"), false},
		{routeRules, "x-envoy-original-url", nil, false},
		{attemptRules, "authorization", v("Bearer k\r\nx: y"), true},
		{attemptRules, "authorization", v("Bearer k"), false},
		{attemptRules, "", nil, true},
		{attemptRules, "bad name", v("x"), true},
		{attemptRules, ":scheme", v("ftp"), true},
	} {
		if got := tc.rules.refused(tc.name, tc.value) != ""; got != tc.want {
			t.Errorf("%+v refused(%q) = %v, want %v", tc.rules, tc.name, got, tc.want)
		}
	}
}

// TestBuiltMutationsPassTheRules is a property test: whatever clients send, the mutations
// the roles build pass the mutation_rules they configure once sanitized, and sanitizing a
// valid mutation changes nothing.
func TestBuiltMutationsPassTheRules(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := "abcXYZ-_: \r\n\x00/é"
	word := func() string {
		var b strings.Builder
		for n := r.IntN(12); n > 0; n-- {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	names := []string{"authorization", "api-key", "x-api-key", "anthropic-version", "content-length", "x-envoy-retry-on",
		"x-switchyard-state", "x-switchyard-cluster", "x-envoy-original-url", ":path", ":authority", "x-request-id", "openai-organization"}
	for i := 0; i < 2000; i++ {
		hm := &corev3.HeaderMap{}
		for n := r.IntN(10); n > 0; n-- {
			name := names[r.IntN(len(names))]
			if r.IntN(4) == 0 {
				name = strings.ToLower(word())
			}
			hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: name, RawValue: []byte(word())})
		}
		h := headerMap{hm}
		st := attemptstate.New(&routing.Request{ID: "r"}, dialect.Chat, t0)
		for _, name := range savedHeaders {
			v, ok := h.get(name)
			st.SaveHeader(name, []byte(v), ok)
		}
		for _, built := range []struct {
			rules mutationRules
			m     mutation
		}{
			{routeRules, attemptHeaders(h, st, "dep-"+word(), time.Duration(r.Int64N(1e12)), time.Duration(r.Int64N(1e12)))},
			{attemptRules, strippedRequest(h, []byte(word()))},
			{attemptRules, redirectMutation("http://gw"+word(), word())},
		} {
			clean, _ := built.rules.sanitize(built.m)
			for _, name := range clean.remove {
				if why := built.rules.refused(name, nil); why != "" {
					t.Fatalf("remove %q survived: %s", name, why)
				}
			}
			for _, hd := range clean.set {
				if why := built.rules.refused(hd.Name, &hd.Value); why != "" {
					t.Fatalf("set %q=%q survived: %s", hd.Name, hd.Value, why)
				}
			}
			again, dropped := built.rules.sanitize(clean)
			if len(dropped) != 0 || len(again.set) != len(clean.set) || len(again.remove) != len(clean.remove) {
				t.Fatalf("sanitize is not idempotent: dropped %v", dropped)
			}
		}
	}
}
