package failure

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter bounds a parsed wait so that callers can add it to a time without overflow.
// Nothing longer means more than "quota exhausted" (Azure's daily limit says 86400 s).
const maxRetryAfter = 365 * 24 * time.Hour

// RetryAfter is the provider's requested wait before the next call, uncapped (behaviour §7.2 caps
// what routing honours), or 0 when the response names none. Sources, in the SDKs' order
// (docs/wire-formats.md §5: openai-python/anthropic-python _calculate_retry_timeout, openai-go and
// anthropic-go retryDelay), then OpenAI's own hints (§1.4, Summary 5):
//
//  1. retry-after-ms: float milliseconds (Azure PTU sends it, §4.3; OpenAI "speculative");
//  2. retry-after: float seconds, or an HTTP date relative to now;
//  3. x-ratelimit-reset-requests / x-ratelimit-reset-tokens: Go-style durations ("6m0s",
//     "12ms", "6.596s"). When x-ratelimit-remaining-* says exactly one dimension is spent
//     ("0"), its reset is used: that is the limit the 429 is about, and the other dimension's
//     reset is the time until it is *fully* replenished, which can be minutes for no reason.
//     Otherwise the larger of the two, since the call needs both;
//  4. the message: OpenAI "Please try again in 6.596s" (§1.4) and Azure "Please retry after 6
//     seconds" (§4.3).
//
// A source that is absent, unparseable, negative, zero, NaN or infinite is skipped in favour of
// the next one (the SDKs fall back to their own backoff instead; a later source is better
// information than none). Header keys may be canonical or lower case (see headerValue).
func RetryAfter(h http.Header, message string, now time.Time) time.Duration {
	d, _ := retryAfter(h, message, now)
	return d
}

// retryAfter is RetryAfter, and whether the wait came from the provider's own Retry-After or
// retry-after-ms header (sources 1 and 2) rather than a hint.
func retryAfter(h http.Header, message string, now time.Time) (time.Duration, bool) {
	if d := headerRetryAfter(h, now); d > 0 {
		return d, true
	}
	if d := rateLimitReset(h); d > 0 {
		return d, false
	}
	return messageRetryAfter(message), false
}

// headerRetryAfter reads retry-after-ms, then retry-after; 0 when neither names a wait.
func headerRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := headerValue(h, "Retry-After-Ms", "retry-after-ms"); v != "" {
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			if d := seconds(f / 1000); d > 0 {
				return d
			}
		}
	}
	if v := headerValue(h, "Retry-After", "retry-after"); v != "" {
		v = strings.TrimSpace(v)
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			if d := seconds(f); d > 0 {
				return d
			}
		} else if t, err := http.ParseTime(v); err == nil {
			if d := t.Sub(now); d > 0 {
				return min(d, maxRetryAfter)
			}
		}
	}
	return 0
}

// rateLimitReset reads OpenAI's x-ratelimit-reset-* headers (docs/wire-formats.md §1.4).
func rateLimitReset(h http.Header) time.Duration {
	reqs := parseWaitToken(headerValue(h, "X-Ratelimit-Reset-Requests", "x-ratelimit-reset-requests"))
	toks := parseWaitToken(headerValue(h, "X-Ratelimit-Reset-Tokens", "x-ratelimit-reset-tokens"))
	reqsSpent := strings.TrimSpace(headerValue(h, "X-Ratelimit-Remaining-Requests", "x-ratelimit-remaining-requests")) == "0"
	toksSpent := strings.TrimSpace(headerValue(h, "X-Ratelimit-Remaining-Tokens", "x-ratelimit-remaining-tokens")) == "0"
	switch {
	case reqsSpent && !toksSpent && reqs > 0:
		return reqs
	case toksSpent && !reqsSpent && toks > 0:
		return toks
	}
	return max(reqs, toks)
}

// messageRetryAfter reads a wait from the message text: "try again in 6.596s" (OpenAI),
// "retry after 6 seconds" (Azure).
func messageRetryAfter(msg string) time.Duration {
	for _, marker := range [...]string{"try again in ", "retry after "} {
		if i := indexFold(msg, marker); i >= 0 {
			if d := parseWaitText(msg[i+len(marker):]); d > 0 {
				return d
			}
		}
	}
	return 0
}

// parseWaitText reads "6.596s", "1m30s", "20ms" (a Go duration, as OpenAI writes them) or
// "6 seconds" / "500 milliseconds" / "2 minutes" / a bare number of seconds from the start of s.
func parseWaitText(s string) time.Duration {
	end := 0
	for end < len(s) && s[end] != ' ' && s[end] != ',' && s[end] != ';' && s[end] != ')' {
		end++
	}
	tok := strings.TrimRight(s[:end], ".")
	if tok == "" || tok[0] < '0' || tok[0] > '9' {
		return 0
	}
	if last := tok[len(tok)-1]; last < '0' || last > '9' {
		return parseWaitToken(tok)
	}
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil {
		return 0
	}
	unit := strings.TrimLeft(s[end:], " ")
	switch {
	case hasPrefixFold(unit, "ms"), hasPrefixFold(unit, "millisecond"):
		return seconds(f / 1000)
	case hasPrefixFold(unit, "min"):
		return seconds(f * 60)
	case hasPrefixFold(unit, "hour"):
		return seconds(f * 3600)
	}
	return seconds(f) // "seconds", "sec", or no unit
}

// parseWaitToken reads a Go-style duration ("6m0s", "12ms", "6.596s"), or a bare number of
// seconds, which OpenAI-compatible servers send in the same headers.
func parseWaitToken(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if last := v[len(v)-1]; last >= '0' && last <= '9' {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0
		}
		return seconds(f)
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0
	}
	return min(d, maxRetryAfter)
}

// seconds converts a float number of seconds; negative, NaN and infinite values are 0 (as
// openai-go ignores them, docs/wire-formats.md §5), large ones are bounded by maxRetryAfter.
func seconds(f float64) time.Duration {
	if !(f > 0) || math.IsInf(f, 1) {
		return 0
	}
	if f >= maxRetryAfter.Seconds() {
		return maxRetryAfter
	}
	return time.Duration(f * float64(time.Second))
}
