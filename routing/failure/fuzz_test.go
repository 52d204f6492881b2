package failure

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkMessage asserts what every Classification.Message and Sanitize result guarantees.
func checkMessage(t *testing.T, msg string) {
	t.Helper()
	if len(msg) > MaxMessageBytes {
		t.Fatalf("message is %d bytes", len(msg))
	}
	if !utf8.ValidString(msg) {
		t.Fatalf("message is not valid UTF-8: %q", msg)
	}
	for _, r := range msg {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			t.Fatalf("message has control character %U: %q", r, msg)
		}
	}
	if again := Sanitize(msg); again != msg {
		t.Fatalf("message is not sanitised:\n %q\n-> %q", msg, again)
	}
}

func FuzzClassify(f *testing.F) {
	for _, set := range [][]classifyCase{openAICases(), responsesCases(), azureCases(), anthropicCases(), compatibleCases()} {
		for _, tc := range set {
			ra := ""
			if tc.in.Header != nil {
				ra = tc.in.Header.Get("Retry-After")
			}
			f.Add(uint8(len(tc.name)), uint8(0), tc.in.Status, tc.in.Body, tc.in.InBand, ra, "")
		}
	}
	f.Add(uint8(0), uint8(3), 200, []byte("data: {\"error\":"), true, "Wed, 21 Oct 2015 07:28:00 GMT", "x")
	f.Add(uint8(2), uint8(0), 401, []byte(`{"error":{"message":"Incorrect API key provided: sk-abc***xyz. Bearer eyJx.y.z"}}`), false, "-1", "1e400")
	providers := [...]Provider{ProviderOpenAI, ProviderAzureOpenAI, ProviderAnthropic, ProviderOpenAICompatible}
	f.Fuzz(func(t *testing.T, provider, transport uint8, status int, body []byte, inBand bool, retryAfter, retryAfterMs string) {
		o := Outcome{
			Provider:  providers[int(provider)%len(providers)],
			Transport: Transport(transport % 10),
			Status:    status,
			Header:    http.Header{"Retry-After": {retryAfter}, "retry-after-ms": {retryAfterMs}},
			Body:      body,
			InBand:    inBand,
		}
		c := Classify(o, testNow())
		if c.Class == ClassNone {
			if c != (Classification{Status: status}) || status < 200 || status > 299 {
				t.Fatalf("success verdict %+v for status %d", c, status)
			}
			return
		}
		checkMessage(t, c.Message)
		if c.Message == "" {
			t.Fatal("failure without a message")
		}
		if c.RetryAfter < 0 || c.RetryAfter > maxRetryAfter {
			t.Fatalf("RetryAfter %v", c.RetryAfter)
		}
		if c.Status != 499 && (c.Status < 400 || c.Status > 599) {
			t.Fatalf("status %d for %+v", c.Status, o)
		}
		if c.Quota && c.Class != ClassThrottle {
			t.Fatalf("quota on class %v", c.Class)
		}
	})
}

func FuzzSanitize(f *testing.F) {
	f.Add("Incorrect API key provided: ", ". You can find your API key at")
	f.Add("Bearer", "\x00")
	f.Add("key=", "&x=1")
	f.Add(strings.Repeat("é", 400), strings.Repeat("x", 2000))
	const secret = "sk-proj-Zq8xSECRET9abc"
	f.Fuzz(func(t *testing.T, before, after string) {
		got := Sanitize(before + " " + secret + " " + after)
		checkMessage(t, got)
		if strings.Contains(got, "Zq8xSECRET9abc") {
			t.Fatalf("secret leaked: %q", got)
		}
		checkMessage(t, Sanitize(before+after))
	})
}
