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
	}
}
