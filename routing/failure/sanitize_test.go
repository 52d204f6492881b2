package failure

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSanitize(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"clean message is unchanged", "Rate limit reached for gpt-4o. Please try again in 3.89s.", "Rate limit reached for gpt-4o. Please try again in 3.89s."},
		{"OpenAI masked key (§1.4)", "Incorrect API key provided: sk-proj-abc12***************************xyz9. You can find your API key at https://platform.openai.com/account/api-keys.",
			"Incorrect API key provided: [REDACTED]. You can find your API key at https://platform.openai.com/account/api-keys."},
		{"OpenAI masked non-sk key", "Incorrect API key provided: abcd************************wxyz.", "Incorrect API key provided: [REDACTED]."},
		{"full sk key", "key sk-abcdefghijklmnopqrstuvwxyz0123456789 is revoked", "key [REDACTED] is revoked"},
		{"Anthropic key", "x-api-key sk-ant-api03-AbC_dEf-123456789 invalid", "x-api-key [REDACTED] invalid"},
		{"bearer token", "Authorization failed for Bearer eyJhbGciOi.JIUzI1NiJ9.sig/+=", "Authorization failed for Bearer [REDACTED]"},
		{"bearer is case-insensitive", "bearer abc123", "bearer [REDACTED]"},
		{"Authorization header echoed", "header Authorization: Basic dXNlcjpwYXNz end", "header Authorization: [REDACTED] end"},
		{"Azure 32-hex key", "Access denied for key 0123456789abcdef0123456789ABCDEF.", "Access denied for key [REDACTED]."},
		{"api-key query value", "GET https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21&api-key=s3cr3t&x=1",
			"GET https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21&api-key=[REDACTED]&x=1"},
		{"key= query value", "url ?key=AIzaShort&alt=sse", "url ?key=[REDACTED]&alt=sse"},
		{"SAS sig", "blob?sv=2022&sig=abc%2Bdef%3D&se=1", "blob?sv=2022&sig=[REDACTED]&se=1"},
		{"api-key header echoed in JSON", `{"api-key": "abc"}`, `{"api-key": "[REDACTED]"}`},
		{"subscription key header", "Ocp-Apim-Subscription-Key: 0123abcd", "Ocp-Apim-Subscription-Key: [REDACTED]"},
		{"JWT alone", "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc rejected", "token [REDACTED] rejected"},
		{"Google key", "key AIzaSyA1234567890abcdefghijklmnopqrstu bad", "key [REDACTED] bad"},
		{"long opaque key", "used gsk_ABCdef1234567890ABCdef1234567890ABCdef1234567890 here", "used [REDACTED] here"},
		{"request IDs, UUIDs and model names stay", "req_011CSHoEeqs5C35K2UUqR7Fy 7c9e6679-7425-40de-944b-e07fc1f90ae7 claude-3-5-sonnet-20241022 my-company-gpt-4o-deployment-eastus2-001",
			"req_011CSHoEeqs5C35K2UUqR7Fy 7c9e6679-7425-40de-944b-e07fc1f90ae7 claude-3-5-sonnet-20241022 my-company-gpt-4o-deployment-eastus2-001"},
		{"words containing sk- are not keys", "task-force mask-value", "task-force mask-value"},
		{"max_tokens= is not a token", "max_tokens=5 is too small", "max_tokens=5 is too small"},
		{"control characters become spaces", "line1\nline2\tx\x00y\x7fz\u0085w", "line1 line2 x y z w"},
		{"invalid UTF-8 becomes a space", "a\xffb", "a b"},
		{"control character does not join a key", "sk\x00-abcdefghijkl", "sk -abcdefghijkl"},
		{"C1 control between Bearer and token", "Bearer\u0085secret", "Bearer [REDACTED]"},
		{"surrounding space trimmed", "  hello \n", "hello"},
		{"non-ASCII kept", "Ошибка: модель перегружена", "Ошибка: модель перегружена"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Sanitize(tc.in)
			if got != tc.want {
				t.Errorf("Sanitize(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if again := Sanitize(got); again != got {
				t.Errorf("not idempotent: %q -> %q", got, again)
			}
		})
	}
}

func TestSanitizeBoundsLength(t *testing.T) {
	long := strings.Repeat("é", 2000) // 2 bytes a rune
	got := Sanitize(long)
	if len(got) > MaxMessageBytes || !utf8.ValidString(got) || len(got) < MaxMessageBytes-2 {
		t.Errorf("len %d, valid %v", len(got), utf8.ValidString(got))
	}
	words := strings.Repeat("word ", 400)
	got = Sanitize(words)
	if len(got) > MaxMessageBytes || strings.HasSuffix(got, "wor") || strings.HasSuffix(got, "wo") {
		t.Errorf("cut inside a word or too long: len %d, tail %q", len(got), got[len(got)-8:])
	}
	// A key after the bound never shows, even partly.
	got = Sanitize(strings.Repeat("a ", 510) + "sk-abcdefghijklmnopqrstuvwxyz")
	if strings.Contains(got, "sk-") || len(got) > MaxMessageBytes {
		t.Errorf("key leaked at the bound: %q", got[len(got)-20:])
	}
	// Redactions that lengthen the message still respect the bound.
	got = Sanitize(strings.Repeat("key=a ", 300))
	if len(got) > MaxMessageBytes || Sanitize(got) != got {
		t.Errorf("len %d or not idempotent", len(got))
	}
}

func TestSanitizeCleanMessageDoesNotAllocate(t *testing.T) {
	msg := "Rate limit reached for gpt-4.1 on tokens per min (TPM): Limit 30000, Used 28039, Requested 3906. Please try again in 3.89s."
	if n := testing.AllocsPerRun(100, func() { _ = Sanitize(msg) }); n != 0 {
		t.Errorf("Sanitize allocated %v times on a clean message", n)
	}
}
