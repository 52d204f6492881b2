package dialect

import "testing"

func TestStreamUsageAskedOnlyByJSONTrue(t *testing.T) {
	for body, want := range map[string]bool{
		`{"stream_options":{"include_usage":true}}`:   true,
		`{"stream_options":{"include_usage":"true"}}`: false,
		`{"stream_options":{"include_usage":1}}`:      false,
		`{"stream_options":{"include_usage":false}}`:  false,
		`{"stream_options":{}}`:                       false,
		`{}`:                                          false,
	} {
		if got := StreamUsageAsked([]byte(body)); got != want {
			t.Errorf("%s: %v, want %v", body, got, want)
		}
		req := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]`
		if body != `{}` {
			req += "," + body[1:]
		} else {
			req += "}"
		}
		r, err := Parser{}.Parse(Chat, []byte(req))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if r.StreamUsage != want {
			t.Errorf("%s: Parse says %v, want %v", body, r.StreamUsage, want)
		}
	}
}
