package rawjson

import (
	"slices"
	"testing"
)

func TestSkipValue(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{`"abc" ,`, 5},
		{`"a\"b"`, 6},
		{`"a\\"b"`, 5}, // the escaped backslash does not escape the quote
		{`"a\\\"b"`, 8},
		{`{"a":[1,"]}",{}]}x`, 17},
		{`[1, 2] `, 6},
		{`-1.5e3,`, 6},
		{`true}`, 4},
		{`"open`, -1},
		{`{"a":1`, -1},
		{`[`, -1},
		{`,`, -1},
		{``, -1},
	} {
		if got := SkipValue(c.in, 0); got != c.want {
			t.Errorf("SkipValue(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestMembers(t *testing.T) {
	var got []string
	end := Members(` { "a" : 1 , "b\"c": {"x":[1]}, "d":"e" } tail`, 0, func(k, v string) bool {
		got = append(got, k+"="+v)
		return true
	})
	if want := []string{`a=1`, `b\"c={"x":[1]}`, `d="e"`}; !slices.Equal(got, want) || end != 41 {
		t.Fatalf("members %q end %d, want %q end 41 (after the object)", got, end, want)
	}
	if end := Members(`{}`, 0, func(string, string) bool { t.Fatal("called"); return true }); end != 2 {
		t.Errorf("empty object end %d", end)
	}
	n := 0
	if end := Members(`{"a":1,"b":2}`, 0, func(string, string) bool { n++; return false }); end != -1 || n != 1 {
		t.Errorf("stopped walk: end %d after %d members", end, n)
	}
	for _, bad := range []string{`{"a":1,}`, `{"a" 1}`, `{"a":}`, `[1]`, `{"a":1`} {
		if end := Members(bad, 0, func(string, string) bool { return true }); end != -1 {
			t.Errorf("Members(%q) = %d, want -1", bad, end)
		}
	}
}

func TestElements(t *testing.T) {
	var got []string
	Elements(` [1, "a,b", {"c":[2]} , null]`, func(v string) bool { got = append(got, v); return true })
	if want := []string{`1`, `"a,b"`, `{"c":[2]}`, `null`}; !slices.Equal(got, want) {
		t.Fatalf("elements %q, want %q", got, want)
	}
	got = nil
	Elements(`[1, 2, 3]`, func(v string) bool { got = append(got, v); return len(got) < 2 })
	if len(got) != 2 {
		t.Fatalf("stopped walk read %q", got)
	}
}
