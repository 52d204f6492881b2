package failure

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := testNow()
	cases := []struct {
		name string
		h    http.Header
		msg  string
		want time.Duration
	}{
		{"none", nil, "", 0},
		{"retry-after-ms float", hdr("retry-after-ms", "1500.5"), "", 1500500 * time.Microsecond},
		{"retry-after-ms wins over retry-after (§5 order)", hdr("retry-after-ms", "250", "retry-after", "10"), "", 250 * time.Millisecond},
		{"retry-after seconds", hdr("Retry-After", "20"), "", 20 * time.Second},
		{"retry-after float seconds", hdr("Retry-After", "1.5"), "", 1500 * time.Millisecond},
		{"retry-after HTTP date", hdr("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat)), "", 90 * time.Second},
		{"retry-after RFC 850 date", hdr("Retry-After", now.Add(time.Minute).Format(time.RFC850)), "", time.Minute},
		{"retry-after date in the past falls through", hdr("Retry-After", now.Add(-time.Minute).Format(http.TimeFormat)), "", 0},
		{"retry-after negative falls through to the message", hdr("Retry-After", "-5"), "Please try again in 2s.", 2 * time.Second},
		{"retry-after-ms negative falls through to retry-after", hdr("retry-after-ms", "-1", "retry-after", "3"), "", 3 * time.Second},
		{"retry-after zero is no wait", hdr("Retry-After", "0"), "", 0},
		{"retry-after garbage", hdr("Retry-After", "soon"), "", 0},
		{"retry-after NaN", hdr("Retry-After", "NaN"), "", 0},
		{"retry-after Inf", hdr("Retry-After", "+Inf"), "", 0},
		{"retry-after huge is bounded", hdr("Retry-After", "1e300"), "", maxRetryAfter},
		{"lower-case keys", http.Header{"retry-after-ms": {"40"}}, "", 40 * time.Millisecond},
		{"x-ratelimit-reset tokens 6.596s (§1.4)", hdr("x-ratelimit-reset-tokens", "6.596s"), "", 6596 * time.Millisecond},
		{"x-ratelimit-reset larger of 6m0s and 12ms", hdr("x-ratelimit-reset-requests", "6m0s", "x-ratelimit-reset-tokens", "12ms"), "", 6 * time.Minute},
		{"x-ratelimit-reset of the spent dimension (tokens)", hdr("x-ratelimit-reset-requests", "6m0s", "x-ratelimit-reset-tokens", "12ms",
			"x-ratelimit-remaining-requests", "499", "x-ratelimit-remaining-tokens", "0"), "", 12 * time.Millisecond},
		{"x-ratelimit-reset of the spent dimension (requests)", hdr("x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "20s",
			"x-ratelimit-remaining-requests", "0", "x-ratelimit-remaining-tokens", "1000"), "", time.Second},
		{"x-ratelimit-reset both spent takes the larger", hdr("x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "20s",
			"x-ratelimit-remaining-requests", "0", "x-ratelimit-remaining-tokens", "0"), "", 20 * time.Second},
		{"x-ratelimit-reset Azure -1 remaining is not spent", hdr("x-ratelimit-reset-tokens", "2s", "x-ratelimit-remaining-tokens", "-1"), "", 2 * time.Second},
		{"x-ratelimit-reset bare seconds", hdr("x-ratelimit-reset-requests", "3"), "", 3 * time.Second},
		{"x-ratelimit-reset invalid", hdr("x-ratelimit-reset-requests", "later"), "", 0},
		{"retry-after wins over x-ratelimit-reset", hdr("retry-after", "4", "x-ratelimit-reset-tokens", "6m0s"), "", 4 * time.Second},
		{"x-ratelimit-reset wins over the message", hdr("x-ratelimit-reset-tokens", "5s"), "Please try again in 3.89s.", 5 * time.Second},
		{"message OpenAI seconds (§1.4)", nil, "Rate limit reached ... Please try again in 6.596s. Visit https://platform.openai.com/account/rate-limits", 6596 * time.Millisecond},
		{"message OpenAI ms", nil, "Please try again in 20ms.", 20 * time.Millisecond},
		{"message OpenAI minutes", nil, "Please try again in 1m30s.", 90 * time.Second},
		{"message Azure seconds (§4.3)", nil, "exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 6 seconds. Please go here", 6 * time.Second},
		{"message Azure one second", nil, "Please retry after 1 second.", time.Second},
		{"message Azure daily (§4.3)", nil, "Please retry after 86400 seconds.", 24 * time.Hour},
		{"message minutes word", nil, "Try again in 2 minutes", 2 * time.Minute},
		{"message no number", nil, "Please try again later.", 0},
		{"message second marker if the first has no number", nil, "Try again in a moment; retry after 5 seconds", 5 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := RetryAfter(tc.h, tc.msg, now); got != tc.want {
				t.Errorf("RetryAfter = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestClassifyRetryAfterHeader: the wait is marked as the provider's own only when a
// Retry-After or retry-after-ms header gave it.
func TestClassifyRetryAfterHeader(t *testing.T) {
	body := []byte(`{"error":{"message":"Rate limit reached. Please try again in 3s.","code":"rate_limit_exceeded"}}`)
	for _, tc := range []struct {
		name string
		h    http.Header
		want bool
	}{
		{"retry-after", http.Header{"Retry-After": {"2"}}, true},
		{"retry-after-ms", http.Header{"retry-after-ms": {"20"}}, true},
		{"reset hint", http.Header{"X-Ratelimit-Reset-Tokens": {"6ms"}}, false},
		{"message", nil, false},
	} {
		c := Classify(Outcome{Provider: ProviderOpenAI, Status: http.StatusTooManyRequests, Header: tc.h, Body: body}, testNow())
		if c.RetryAfter <= 0 || c.RetryAfterHeader != tc.want {
			t.Errorf("%s: RetryAfter %v header %v, want a wait and header %v", tc.name, c.RetryAfter, c.RetryAfterHeader, tc.want)
		}
	}
}
