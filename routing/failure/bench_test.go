package failure

import "testing"

func BenchmarkClassify(b *testing.B) {
	now := testNow()
	cases := []struct {
		name string
		o    Outcome
	}{
		{"openai-429", httpErr(ProviderOpenAI, 429,
			`{"error":{"message":"Rate limit reached for gpt-4.1 in organization org-abc on tokens per min (TPM): Limit 30000, Used 28039, Requested 3906. Please try again in 3.89s. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			hdr("x-ratelimit-limit-tokens", "30000", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "6.596s",
				"x-ratelimit-remaining-requests", "499", "x-ratelimit-reset-requests", "120ms", "x-request-id", "req_123"))},
		{"azure-429", httpErr(ProviderAzureOpenAI, 429,
			`{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-08-01-preview have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 6 seconds. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit."}}`,
			hdr("retry-after", "6", "retry-after-ms", "6000"))},
		{"anthropic-inband-overloaded", inBand(ProviderAnthropic, "error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)},
		{"responses-inband-context", inBand(ProviderOpenAI, "error", `{"type":"error","sequence_number":2,"error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"Your input exceeds the context window of this model. Please adjust your input and try again.","param":"input"}}`)},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Classify(tc.o, now)
			}
		})
	}
}
