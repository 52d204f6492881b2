package dialect

import "github.com/tidwall/gjson"

// UsageAsked reports whether a Chat request's stream_options ask for the stream's usage
// chunk: include_usage is the JSON true, nothing else (a string "true" is not). The route
// role's parse, the attempt role (which removes the usage chunk the client did not ask for)
// and the provider rewrite (which asks for it anyway) all read it here, so they agree.
func UsageAsked(streamOptions gjson.Result) bool {
	return streamOptions.Get("include_usage").Type == gjson.True
}

// StreamUsageAsked is UsageAsked of a request body's stream_options.
func StreamUsageAsked(body []byte) bool {
	return UsageAsked(gjson.GetBytes(body, "stream_options"))
}
