package failure

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func testNow() time.Time { return time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC) }

// hdr builds canonical headers from key, value pairs.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func httpErr(p Provider, status int, body string, h http.Header) Outcome {
	return Outcome{Provider: p, Status: status, Header: h, Body: []byte(body)}
}

func inBand(p Provider, event, data string) Outcome {
	return Outcome{Provider: p, Status: 200, Body: []byte(data), InBand: true, Event: event}
}

// want is what a row asserts. Type, Code and Param are compared exactly (empty means the
// body has none); msg must be contained in the message, secret must not.
type want struct {
	class      Class
	kind       Kind
	quota      bool
	status     int
	typ, code  string
	param      string
	retryAfter time.Duration
	msg        string
	secret     string
}

type classifyCase struct {
	name string
	in   Outcome
	want want
}

// The bodies below are the shapes of docs/wire-formats.md, verbatim where the document
// gives a snippet (§1.3, §1.4 429, §2.2, §3.3, §3.4 529, §4.2) and built from its tables
// otherwise. Section numbers refer to that document.
func openAICases() []classifyCase {
	const p = ProviderOpenAI
	return []classifyCase{
		{"openai 400 invalid param (§1.4)", httpErr(p, 400, `{"error":{"message":"Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 instead.","type":"invalid_request_error","param":"temperature","code":"decimal_above_max_value"}}`, nil),
			want{class: ClassRequest, kind: KindInvalidRequest, status: 400, typ: "invalid_request_error", code: "decimal_above_max_value", param: "temperature", msg: "Invalid 'temperature'"}},
		{"openai 400 context_length_exceeded (§1.4)", httpErr(p, 400, `{"error":{"message":"This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, nil),
			want{class: ClassRequest, kind: KindContextOverflow, status: 400, typ: "invalid_request_error", code: "context_length_exceeded", param: "messages", msg: "maximum context length"}},
		{"openai 400 invalid_prompt (§1.4)", httpErr(p, 400, `{"error":{"message":"Invalid prompt: your prompt was flagged as potentially violating our usage policy. Please try again with a different prompt.","type":"invalid_request_error","param":null,"code":"invalid_prompt"}}`, nil),
			want{class: ClassRequest, kind: KindPolicy, status: 400, typ: "invalid_request_error", code: "invalid_prompt"}},
		{"openai 400 content_policy_violation (§1.4)", httpErr(p, 400, `{"error":{"message":"Your request was rejected as a result of our safety system.","type":"invalid_request_error","param":null,"code":"content_policy_violation"}}`, nil),
			want{class: ClassRequest, kind: KindPolicy, status: 400, typ: "invalid_request_error", code: "content_policy_violation"}},
		{"openai 400 usage policy text only", httpErr(p, 400, `{"error":{"message":"This request may be violating our usage policy.","type":"invalid_request_error","param":null,"code":null}}`, nil),
			want{class: ClassRequest, kind: KindPolicy, status: 400, typ: "invalid_request_error"}},
		{"openai 401 invalid_api_key redacts the key fragment (§1.4)", httpErr(p, 401, `{"error":{"message":"Incorrect API key provided: sk-proj-abc12***************************xyz9. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, nil),
			want{class: ClassConfiguration, kind: KindAuth, status: 401, typ: "invalid_request_error", code: "invalid_api_key", msg: "Incorrect API key provided: [REDACTED]. You can find", secret: "abc12"}},
		{"openai 401 missing scopes (§1.4)", httpErr(p, 401, `{"error":{"message":"You have insufficient permissions for this operation. Missing scopes: api.responses.write.","type":"invalid_request_error","param":null,"code":null}}`, nil),
			want{class: ClassConfiguration, kind: KindAuth, status: 401, typ: "invalid_request_error", msg: "Missing scopes: api.responses.write."}},
		{"openai 403 unsupported region (§1.4)", httpErr(p, 403, `{"error":{"message":"Country, region, or territory not supported","type":"request_forbidden","param":null,"code":"unsupported_country_region_territory"}}`, nil),
			want{class: ClassConfiguration, kind: KindAuth, status: 403, typ: "request_forbidden", code: "unsupported_country_region_territory"}},
		{"openai 404 model_not_found (§1.4)", httpErr(p, 404, "{\"error\":{\"message\":\"The model `gpt-4` does not exist or you do not have access to it.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"model_not_found\"}}", nil),
			want{class: ClassConfiguration, kind: KindInvalidRequest, status: 404, typ: "invalid_request_error", code: "model_not_found", msg: "does not exist"}},
		{"openai 404 about a client-supplied ID is the request's fault", httpErr(p, 404, `{"error":{"message":"Previous response with id 'resp_model_123' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`, nil),
			want{class: ClassRequest, kind: KindInvalidRequest, status: 404, typ: "invalid_request_error", code: "previous_response_not_found", param: "previous_response_id"}},
		{"openai 429 rate_limit_exceeded with x-ratelimit headers (§1.4)", httpErr(p, 429, `{"error":{"message":"Rate limit reached for gpt-4.1 ... on tokens per min (TPM): Limit 30000, Used 28039, Requested 3906. Please try again in 3.89s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			hdr("x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "6.596s")),
			want{class: ClassThrottle, kind: KindRateLimit, status: 429, typ: "tokens", code: "rate_limit_exceeded", retryAfter: 6596 * time.Millisecond}},
		{"openai 429 message-only wait (§1.4)", httpErr(p, 429, `{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, nil),
			want{class: ClassThrottle, kind: KindRateLimit, status: 429, typ: "requests", code: "rate_limit_exceeded", retryAfter: 120 * time.Millisecond}},
		{"openai 429 insufficient_quota (§1.4)", httpErr(p, 429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`, nil),
			want{class: ClassThrottle, kind: KindRateLimit, quota: true, status: 429, typ: "insufficient_quota", code: "insufficient_quota"}},
		{"openai 429 insufficient_quota, older body with code null (§1.4)", httpErr(p, 429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":null}}`, nil),
			want{class: ClassThrottle, kind: KindRateLimit, quota: true, status: 429, typ: "insufficient_quota"}},
		{"openai 429 engine overloaded (older docs, §1.4)", httpErr(p, 429, `{"error":{"message":"That model is currently overloaded with other requests. You can retry your request.","type":"server_error","param":null,"code":null}}`, nil),
			want{class: ClassThrottle, kind: KindRateLimit, status: 429, typ: "server_error"}},
		{"openai 400 Request too large on TPM is a rate limit (LiteLLM, §5)", httpErr(p, 400, `{"error":{"message":"Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Requested 30601. The input or output tokens must be reduced in order to run successfully.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`, nil),
			want{class: ClassThrottle, kind: KindRateLimit, status: 400, typ: "tokens", code: "rate_limit_exceeded"}},
		{"openai 400 quoting 'rate limit' mid-message stays a request fault", httpErr(p, 400, `{"error":{"message":"Invalid value: 'rate limit reached'. Supported values are: 'auto'.","type":"invalid_request_error","param":"service_tier","code":"invalid_value"}}`, nil),
			want{class: ClassRequest, kind: KindInvalidRequest, status: 400, typ: "invalid_request_error", code: "invalid_value", param: "service_tier"}},
		{"openai 500 server_error (§1.4)", httpErr(p, 500, `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`, nil),
			want{class: ClassTransient, kind: KindServerError, status: 500, typ: "server_error"}},
		{"openai 503 server_is_overloaded (§1.4)", httpErr(p, 503, `{"error":{"message":"The engine is currently overloaded, please try again later.","type":"service_unavailable_error","param":null,"code":"server_is_overloaded"}}`, nil),
			want{class: ClassTransient, kind: KindOverloaded, status: 503, typ: "service_unavailable_error", code: "server_is_overloaded"}},
		{"openai 503 slow_down (§1.4)", httpErr(p, 503, `{"error":{"message":"Slow Down","type":"service_unavailable_error","param":null,"code":"slow_down"}}`, hdr("Retry-After", "2")),
			want{class: ClassTransient, kind: KindOverloaded, status: 503, typ: "service_unavailable_error", code: "slow_down", retryAfter: 2 * time.Second}},
		{"openai 502 HTML from a proxy", httpErr(p, 502, "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body><center><h1>502 Bad Gateway</h1></center></body></html>", nil),
			want{class: ClassTransient, kind: KindServerError, status: 502, msg: "Bad Gateway"}},
		{"openai 503 empty body", httpErr(p, 503, "", nil),
			want{class: ClassTransient, kind: KindOverloaded, status: 503, msg: "Service Unavailable"}},
		{"openai 504", httpErr(p, 504, "", nil), want{class: ClassTransient, kind: KindTimeout, status: 504}},
		{"openai 408 (SDKs retry, §5)", httpErr(p, 408, "", nil), want{class: ClassTransient, kind: KindTimeout, status: 408}},
		{"openai 409 (SDKs retry, §5)", httpErr(p, 409, `{"error":{"message":"Conflict","type":"invalid_request_error","param":null,"code":null}}`, nil),
			want{class: ClassTransient, kind: KindUnknown, status: 409, typ: "invalid_request_error"}},
		{"openai 422", httpErr(p, 422, `{"error":{"message":"Unprocessable","type":"invalid_request_error","param":null,"code":null}}`, nil),
			want{class: ClassRequest, kind: KindInvalidRequest, status: 422, typ: "invalid_request_error"}},
		{"openai in-band chat data (§1.3)", inBand(p, "", `{"error":{"message":"The server had an error processing your request.","type":"server_error","param":null,"code":null}}`),
			want{class: ClassTransient, kind: KindServerError, status: 500, typ: "server_error", msg: "The server had an error"}},
		{"openai in-band chat given as an SSE event (§1.3)", inBand(p, "", "data: {\"error\":{\"message\":\"The server had an error processing your request.\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\ndata: [DONE]\n\n"),
			want{class: ClassTransient, kind: KindServerError, status: 500, typ: "server_error"}},
		{"openai in-band chat context overflow", inBand(p, "", `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`),
			want{class: ClassRequest, kind: KindContextOverflow, status: 400, typ: "invalid_request_error", code: "context_length_exceeded", param: "messages"}},
		{"openai in-band insufficient_quota with code null", inBand(p, "", `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":null}}`),
			want{class: ClassThrottle, kind: KindRateLimit, quota: true, status: 429, typ: "insufficient_quota"}},
		{"openai in-band without a message", inBand(p, "", `{"error":{"type":"server_error"}}`),
			want{class: ClassTransient, kind: KindServerError, status: 500, typ: "server_error", msg: "An error occurred during streaming"}},
		{"openai 302 redirect", httpErr(p, 302, "", hdr("Location", "https://example.com/")),
			want{class: ClassTransient, kind: KindUnknown, status: 502}},
	}
}

func responsesCases() []classifyCase {
	const p = ProviderOpenAI
	return []classifyCase{
		{"responses event:error nested context_length_exceeded (§2.2)", inBand(p, "error", `{"type":"error","sequence_number":2,"error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"Your input exceeds the context window of this model. Please adjust your input and try again.","param":"input"}}`),
			want{class: ClassRequest, kind: KindContextOverflow, status: 400, typ: "invalid_request_error", code: "context_length_exceeded", param: "input", msg: "exceeds the context window"}},
		{"responses event:error nested server_is_overloaded (§2.2)", inBand(p, "error", `{"type":"error","error":{"type":"service_unavailable_error","code":"server_is_overloaded","message":"Our servers are currently overloaded. Please try again later."}}`),
			want{class: ClassTransient, kind: KindOverloaded, status: 503, typ: "service_unavailable_error", code: "server_is_overloaded"}},
		{"responses event:error flat rate_limit_exceeded (SDK ResponseErrorEvent, §2.2)", inBand(p, "error", `{"type":"error","code":"rate_limit_exceeded","message":"Rate limit reached for gpt-5. Please try again in 1.5s.","param":null,"sequence_number":3}`),
			want{class: ClassThrottle, kind: KindRateLimit, status: 429, code: "rate_limit_exceeded", retryAfter: 1500 * time.Millisecond}},
		{"responses event:error flat context (§2.2)", inBand(p, "error", `{"type":"error","code":"context_length_exceeded","message":"Your input exceeds the context window of this model.","param":"input","sequence_number":2}`),
			want{class: ClassRequest, kind: KindContextOverflow, status: 400, code: "context_length_exceeded", param: "input"}},
		{"responses event:error flat with code null", inBand(p, "error", `{"type":"error","code":null,"message":"An error occurred while processing your request.","param":null,"sequence_number":1}`),
			want{class: ClassTransient, kind: KindServerError, status: 500}},
		{"responses response.failed server_is_overloaded (§2.2)", inBand(p, "response.failed", `{"type":"response.failed","sequence_number":7,"response":{"id":"resp_1","status":"failed","output":[],"error":{"code":"server_is_overloaded","message":"Our servers are currently overloaded. Please try again later."}}}`),
			want{class: ClassTransient, kind: KindOverloaded, status: 503, code: "server_is_overloaded"}},
		{"responses response.failed server_error (§2.2)", inBand(p, "response.failed", `{"type":"response.failed","sequence_number":7,"response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"The model failed to generate a response."}}}`),
			want{class: ClassTransient, kind: KindServerError, status: 500, code: "server_error"}},
		{"responses response.failed rate_limit_exceeded (§2.2)", inBand(p, "response.failed", `{"type":"response.failed","response":{"status":"failed","error":{"code":"rate_limit_exceeded","message":"Rate limit reached."}}}`),
			want{class: ClassThrottle, kind: KindRateLimit, status: 429, code: "rate_limit_exceeded"}},
		{"responses response.failed invalid_prompt (§2.2)", inBand(p, "response.failed", `{"type":"response.failed","response":{"status":"failed","error":{"code":"invalid_prompt","message":"Invalid prompt: your prompt was flagged as potentially violating our usage policy."}}}`),
			want{class: ClassRequest, kind: KindPolicy, status: 400, code: "invalid_prompt"}},
		{"responses response.failed vector_store_timeout (§2.2)", inBand(p, "response.failed", `{"type":"response.failed","response":{"status":"failed","error":{"code":"vector_store_timeout","message":"Vector store timed out."}}}`),
			want{class: ClassTransient, kind: KindTimeout, status: 504, code: "vector_store_timeout"}},
		{"responses response.failed image_file_not_found is the request's (§2.2)", inBand(p, "response.failed", `{"type":"response.failed","response":{"status":"failed","error":{"code":"image_file_not_found","message":"Image file not found."}}}`),
			want{class: ClassRequest, kind: KindInvalidRequest, status: 400, code: "image_file_not_found"}},
		{"responses response.failed image_content_policy_violation (§2.2)", inBand(p, "response.failed", `{"type":"response.failed","response":{"status":"failed","error":{"code":"image_content_policy_violation","message":"The image was rejected."}}}`),
			want{class: ClassRequest, kind: KindPolicy, status: 400, code: "image_content_policy_violation"}},
	}
}

func azureCases() []classifyCase {
	const p = ProviderAzureOpenAI
	return []classifyCase{
		{"azure 400 content_filter with innererror (concept doc, §4.2)", httpErr(p, 400, `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":true,"severity":"high"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":true,"severity":"medium"}}}}}`, nil),
			want{class: ClassRequest, kind: KindPolicy, status: 400, code: "content_filter", param: "prompt"}},
		{"azure 400 content_filter with inner_error (OpenAPI spelling, §4.2)", httpErr(p, 400, `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400,"inner_error":{"code":"ResponsibleAIPolicyViolation","content_filter_results":{"hate":{"filtered":true,"severity":"high"}}}}}`, nil),
			want{class: ClassRequest, kind: KindPolicy, status: 400, code: "content_filter", param: "prompt"}},
		{"azure 400 innererror alone decides (§4.2)", httpErr(p, 400, `{"error":{"message":"Bad request.","param":"prompt","code":"BadRequest","innererror":{"code":"ResponsibleAIPolicyViolation"}}}`, nil),
			want{class: ClassRequest, kind: KindPolicy, status: 400, code: "BadRequest", param: "prompt"}},
		{"azure 400 inner_error alone decides (§4.2)", httpErr(p, 400, `{"error":{"message":"Bad request.","param":"prompt","code":"BadRequest","inner_error":{"code":"ResponsibleAIPolicyViolation"}}}`, nil),
			want{class: ClassRequest, kind: KindPolicy, status: 400, code: "BadRequest", param: "prompt"}},
		{"azure 400 context by message (§4.3, Summary 4)", httpErr(p, 400, `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":null}}`, nil),
			want{class: ClassRequest, kind: KindContextOverflow, status: 400, typ: "invalid_request_error", param: "messages"}},
		{"azure 429 retry after 6 seconds (§4.3)", httpErr(p, 429, `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-08-01-preview have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 6 seconds. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit."}}`, nil),
			want{class: ClassThrottle, kind: KindRateLimit, status: 429, code: "429", retryAfter: 6 * time.Second}},
		{"azure 429 retry after 86400 seconds is a quota (§4.3)", httpErr(p, 429, `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-08-01-preview have exceeded call rate limit of your current OpenAI S0 pricing tier. Please retry after 86400 seconds. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit."}}`, nil),
			want{class: ClassThrottle, kind: KindRateLimit, quota: true, status: 429, code: "429", retryAfter: 24 * time.Hour}},
		{"azure 429 daily text with a short header is still a quota", httpErr(p, 429, `{"error":{"code":"429","message":"Please retry after 86400 seconds."}}`, hdr("Retry-After", "6")),
			want{class: ClassThrottle, kind: KindRateLimit, quota: true, status: 429, code: "429", retryAfter: 6 * time.Second}},
		{"azure 429 Retry-After of an hour is a quota", httpErr(p, 429, `{"error":{"code":"429","message":"Rate limit is exceeded."}}`, hdr("Retry-After", "3600")),
			want{class: ClassThrottle, kind: KindRateLimit, quota: true, status: 429, code: "429", retryAfter: time.Hour}},
		{"azure 429 PTU retry-after-ms wins over retry-after (§4.3, §5)", httpErr(p, 429, `{"error":{"code":"429","message":"Rate limit is exceeded. Try again in 2 seconds."}}`, hdr("retry-after-ms", "1500", "retry-after", "2")),
			want{class: ClassThrottle, kind: KindRateLimit, status: 429, code: "429", retryAfter: 1500 * time.Millisecond}},
		{"azure 429 lower-case header keys (Envoy)", httpErr(p, 429, `{"error":{"code":"429","message":"Rate limit is exceeded."}}`, http.Header{"retry-after": {"7"}}),
			want{class: ClassThrottle, kind: KindRateLimit, status: 429, code: "429", retryAfter: 7 * time.Second}},
		{"azure 401 code \"401\" (§4.3)", httpErr(p, 401, `{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."}}`, nil),
			want{class: ClassConfiguration, kind: KindAuth, status: 401, code: "401", msg: "invalid subscription key or wrong API endpoint"}},
		{"azure 401 code Unauthorized (§4.3)", httpErr(p, 401, `{"error":{"code":"Unauthorized","message":"Access token is missing or invalid."}}`, nil),
			want{class: ClassConfiguration, kind: KindAuth, status: 401, code: "Unauthorized"}},
		{"azure 404 DeploymentNotFound (§4.3)", httpErr(p, 404, `{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."}}`, nil),
			want{class: ClassConfiguration, kind: KindInvalidRequest, status: 404, code: "DeploymentNotFound"}},
		{"azure 404 Resource not found (wrong path or api-version)", httpErr(p, 404, `{"error":{"code":"404","message":"Resource not found"}}`, nil),
			want{class: ClassConfiguration, kind: KindInvalidRequest, status: 404, code: "404"}},
		{"azure in-band chat error with string code 429", inBand(p, "", `{"error":{"code":"429","message":"Rate limit is exceeded. Please retry after 3 seconds."}}`),
			want{class: ClassThrottle, kind: KindRateLimit, status: 429, code: "429", retryAfter: 3 * time.Second}},
		{"azure 500 InternalServerError", httpErr(p, 500, `{"error":{"code":"InternalServerError","message":"The service is temporarily unable to process your request. Please try again later."}}`, nil),
			want{class: ClassTransient, kind: KindServerError, status: 500, code: "InternalServerError"}},
	}
}

func anthropicCases() []classifyCase {
	const p = ProviderAnthropic
	return []classifyCase{
		{"anthropic 400 invalid_request_error (§3.4)", httpErr(p, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate between \"user\" and \"assistant\""},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`, nil),
			want{class: ClassRequest, kind: KindInvalidRequest, status: 400, typ: "invalid_request_error", msg: `roles must alternate between "user"`}},
		{"anthropic 400 prompt is too long (§3.4)", httpErr(p, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 207791 tokens > 200000 maximum"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`, nil),
			want{class: ClassRequest, kind: KindContextOverflow, status: 400, typ: "invalid_request_error", msg: "prompt is too long"}},
		{"anthropic 400 input length and max_tokens exceed context limit (§3.4)", httpErr(p, 400, "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"input length and `max_tokens` exceed context limit: 182831 + 64000 > 200000, decrease input length or `max_tokens` and try again\"},\"request_id\":\"req_01\"}", nil),
			want{class: ClassRequest, kind: KindContextOverflow, status: 400, typ: "invalid_request_error"}},
		{"anthropic 400 credit balance too low is a quota", httpErr(p, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."},"request_id":"req_011CbrFTcXhtiMzr3s6EocF7"}`, nil),
			want{class: ClassThrottle, kind: KindRateLimit, quota: true, status: 400, typ: "invalid_request_error"}},
		{"anthropic 401 authentication_error (§3.4)", httpErr(p, 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_01"}`, nil),
			want{class: ClassConfiguration, kind: KindAuth, status: 401, typ: "authentication_error", msg: "invalid x-api-key"}},
		{"anthropic 403 permission_error (§3.4)", httpErr(p, 403, `{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}`, nil),
			want{class: ClassConfiguration, kind: KindAuth, status: 403, typ: "permission_error"}},
		{"anthropic 404 not_found_error for the model (§3.4)", httpErr(p, 404, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-3-opus-nope"},"request_id":"req_404"}`, nil),
			want{class: ClassConfiguration, kind: KindInvalidRequest, status: 404, typ: "not_found_error", msg: "model: claude-3-opus-nope"}},
		{"anthropic 404 not_found_error for a file is the request's", httpErr(p, 404, `{"type":"error","error":{"type":"not_found_error","message":"File not found: file_011CNha8iCJcU1wXNR6q4V8w"}}`, nil),
			want{class: ClassRequest, kind: KindInvalidRequest, status: 404, typ: "not_found_error"}},
		{"anthropic 404 for a file with x-should-retry true is transient", httpErr(p, 404, `{"type":"error","error":{"type":"not_found_error","message":"File not found: file_011"}}`, hdr("x-should-retry", "true")),
			want{class: ClassTransient, kind: KindInvalidRequest, status: 404, typ: "not_found_error"}},
		{"anthropic 413 request_too_large (§3.4)", httpErr(p, 413, `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`, nil),
			want{class: ClassRequest, kind: KindInvalidRequest, status: 413, typ: "request_too_large"}},
		{"anthropic 413 from Cloudflare, not API-shaped (§3.4)", httpErr(p, 413, "<html><head><title>413 Request Entity Too Large</title></head><body>cloudflare</body></html>", nil),
			want{class: ClassRequest, kind: KindInvalidRequest, status: 413, msg: "Request Entity Too Large"}},
		{"anthropic 429 rate_limit_error with retry-after (§3.4, §3.5)", httpErr(p, 429, `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50,000 input tokens per minute."}}`, hdr("retry-after", "30", "anthropic-ratelimit-input-tokens-reset", "2026-09-01T12:00:30Z")),
			want{class: ClassThrottle, kind: KindRateLimit, status: 429, typ: "rate_limit_error", retryAfter: 30 * time.Second}},
		{"anthropic 429 enforced_spend_limit_reached (§3.5)", httpErr(p, 429, `{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your specified workspace API usage limits.","details":{"error_code":"enforced_spend_limit_reached"}}}`, hdr("retry-after", "30")),
			want{class: ClassThrottle, kind: KindRateLimit, quota: true, status: 429, typ: "rate_limit_error", retryAfter: 30 * time.Second}},
		{"anthropic 402 billing_error (SDK error_type.py)", httpErr(p, 402, `{"type":"error","error":{"type":"billing_error","message":"Your account has a billing issue."}}`, nil),
			want{class: ClassThrottle, kind: KindRateLimit, quota: true, status: 402, typ: "billing_error"}},
		{"anthropic 500 api_error (§3.4)", httpErr(p, 500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, nil),
			want{class: ClassTransient, kind: KindServerError, status: 500, typ: "api_error"}},
		{"anthropic 529 overloaded_error with x-should-retry (§3.4)", httpErr(p, 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_01..."}`, hdr("x-should-retry", "true", "request-id", "req_01...")),
			want{class: ClassTransient, kind: KindOverloaded, status: 529, typ: "overloaded_error", msg: "Overloaded"}},
		{"anthropic 500 overloaded_error is an overload", httpErr(p, 500, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, nil),
			want{class: ClassTransient, kind: KindOverloaded, status: 500, typ: "overloaded_error"}},
		{"anthropic 503 x-should-retry false stays transient", httpErr(p, 503, `{"type":"error","error":{"type":"api_error","message":"Service unavailable"}}`, hdr("x-should-retry", "false")),
			want{class: ClassTransient, kind: KindOverloaded, status: 503, typ: "api_error"}},
		{"anthropic 400 x-should-retry true is transient", httpErr(p, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"Please retry."}}`, hdr("x-should-retry", "true")),
			want{class: ClassTransient, kind: KindInvalidRequest, status: 400, typ: "invalid_request_error"}},
		{"anthropic 529 empty body", httpErr(p, 529, "", nil), want{class: ClassTransient, kind: KindOverloaded, status: 529, msg: "Overloaded"}},
		{"anthropic event:error overloaded_error (§3.3)", inBand(p, "error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
			want{class: ClassTransient, kind: KindOverloaded, status: 529, typ: "overloaded_error", msg: "Overloaded"}},
		{"anthropic event:error given as an SSE event (§3.3)", inBand(p, "error", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"),
			want{class: ClassTransient, kind: KindOverloaded, status: 529, typ: "overloaded_error"}},
		{"anthropic event:error api_error (§3.3)", inBand(p, "error", `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`),
			want{class: ClassTransient, kind: KindServerError, status: 500, typ: "api_error"}},
		{"anthropic event:error rate_limit_error (§3.3)", inBand(p, "error", `{"type":"error","error":{"type":"rate_limit_error","message":"Rate limited"}}`),
			want{class: ClassThrottle, kind: KindRateLimit, status: 429, typ: "rate_limit_error"}},
		{"anthropic event:error timeout_error (§3.3)", inBand(p, "error", `{"type":"error","error":{"type":"timeout_error","message":"Request timed out"}}`),
			want{class: ClassTransient, kind: KindTimeout, status: 504, typ: "timeout_error"}},
		{"anthropic event:error authentication_error (§3.3)", inBand(p, "error", `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`),
			want{class: ClassConfiguration, kind: KindAuth, status: 401, typ: "authentication_error"}},
		{"anthropic event:error permission_error (§3.3)", inBand(p, "error", `{"type":"error","error":{"type":"permission_error","message":"no access"}}`),
			want{class: ClassConfiguration, kind: KindAuth, status: 403, typ: "permission_error"}},
		{"anthropic event:error not_found_error model (§3.3)", inBand(p, "error", `{"type":"error","error":{"type":"not_found_error","message":"model: claude-x"}}`),
			want{class: ClassConfiguration, kind: KindInvalidRequest, status: 404, typ: "not_found_error"}},
		{"anthropic event:error billing_error (§3.3)", inBand(p, "error", `{"type":"error","error":{"type":"billing_error","message":"billing"}}`),
			want{class: ClassThrottle, kind: KindRateLimit, quota: true, status: 402, typ: "billing_error"}},
		{"anthropic event:error invalid_request_error prompt too long (§3.3)", inBand(p, "error", `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 207791 tokens > 200000 maximum"}}`),
			want{class: ClassRequest, kind: KindContextOverflow, status: 400, typ: "invalid_request_error"}},
		{"anthropic event:error unknown type with Overloaded text", inBand(p, "error", `{"type":"error","error":{"type":"something_new","message":"Overloaded"}}`),
			want{class: ClassTransient, kind: KindOverloaded, status: 529, typ: "something_new"}},
	}
}

func compatibleCases() []classifyCase {
	const p = ProviderOpenAICompatible
	return []classifyCase{
		{"openrouter 429 numeric code (§1.3)", httpErr(p, 429, `{"error":{"code":429,"message":"Rate limit exceeded: free-models-per-day","metadata":{"headers":{"X-RateLimit-Limit":"50"}}}}`, nil),
			want{class: ClassThrottle, kind: KindRateLimit, status: 429, code: "429"}},
		{"openrouter 402 no credits", httpErr(p, 402, `{"error":{"code":402,"message":"Insufficient credits"}}`, nil),
			want{class: ClassThrottle, kind: KindRateLimit, quota: true, status: 402, code: "402"}},
		{"openrouter in-band numeric code 502 (§1.3)", inBand(p, "", `{"id":"gen-1","object":"chat.completion.chunk","error":{"code":502,"message":"Provider returned error"},"choices":[{"index":0,"delta":{},"finish_reason":"error"}]}`),
			want{class: ClassTransient, kind: KindServerError, status: 502, code: "502"}},
		{"compatible flat vLLM-style body", httpErr(p, 400, `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}`, nil),
			want{class: ClassRequest, kind: KindContextOverflow, status: 400, typ: "BadRequestError", code: "400"}},
		{"compatible llama.cpp context size", httpErr(p, 400, `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}`, nil),
			want{class: ClassRequest, kind: KindContextOverflow, status: 400, typ: "exceed_context_size_error", code: "400"}},
		{"compatible error as a string, missing model", httpErr(p, 404, `{"error":"model 'llama3' not found, try pulling it first"}`, nil),
			want{class: ClassConfiguration, kind: KindInvalidRequest, status: 404, msg: "model 'llama3' not found"}},
		{"compatible FastAPI detail 404", httpErr(p, 404, `{"detail":"Not Found"}`, nil),
			want{class: ClassConfiguration, kind: KindInvalidRequest, status: 404, msg: "Not Found"}},
		{"compatible plain-text 400", httpErr(p, 400, "Bad Request: model is required\n", nil),
			want{class: ClassRequest, kind: KindInvalidRequest, status: 400, msg: "Bad Request: model is required"}},
		{"compatible plain-text 503 from Envoy", httpErr(p, 503, "upstream connect error or disconnect/reset before headers. reset reason: connection failure", nil),
			want{class: ClassTransient, kind: KindOverloaded, status: 503, msg: "upstream connect error"}},
		{"compatible array-wrapped error", httpErr(p, 429, `[{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}]`, nil),
			want{class: ClassThrottle, kind: KindRateLimit, status: 429, code: "429"}},
		{"compatible truncated JSON", httpErr(p, 500, `{"error":{"message":"boom","type":"server_`, nil),
			want{class: ClassTransient, kind: KindServerError, status: 500}},
		{"compatible 401 leaking a bearer token", httpErr(p, 401, `{"error":{"message":"invalid header Authorization: Bearer abc.def-ghi/jkl+mno= for https://api.example.com/v1?api-key=0123456789abcdef&x=1","type":"authentication_error"}}`, nil),
			want{class: ClassConfiguration, kind: KindAuth, status: 401, typ: "authentication_error", msg: "api-key=[REDACTED]&x=1", secret: "abc.def"}},
		{"compatible in-band error as a string", inBand(p, "", `{"error":"upstream overloaded"}`),
			want{class: ClassTransient, kind: KindOverloaded, status: 503}},
		{"compatible 451", httpErr(p, 451, "", nil), want{class: ClassRequest, kind: KindInvalidRequest, status: 451, msg: "Unavailable For Legal Reasons"}},
		{"compatible 599", httpErr(p, 599, "", nil), want{class: ClassTransient, kind: KindServerError, status: 599, msg: "upstream error"}},
		{"compatible status 0 without transport", httpErr(p, 0, "", nil), want{class: ClassTransient, kind: KindUnknown, status: 502}},
	}
}

func transportCases() []classifyCase {
	o := func(t Transport, status int) Outcome {
		return Outcome{Provider: ProviderOpenAI, Transport: t, Status: status, Body: []byte(`{"error":{"type":"ignored"}}`)}
	}
	return []classifyCase{
		{"transport connect", o(TransportConnect, 0), want{class: ClassTransient, kind: KindConnect, status: 502}},
		{"transport reset before the response", o(TransportReset, 0), want{class: ClassTransient, kind: KindConnect, status: 502}},
		{"transport reset after 200", o(TransportReset, 200), want{class: ClassTransient, kind: KindPartialStream, status: 502}},
		{"transport timeout", o(TransportTimeout, 0), want{class: ClassTransient, kind: KindTimeout, status: 504}},
		{"transport idle", o(TransportIdle, 200), want{class: ClassTransient, kind: KindTimeout, status: 504}},
		{"transport truncated", o(TransportTruncated, 200), want{class: ClassTransient, kind: KindPartialStream, status: 502}},
		{"transport malformed", o(TransportMalformed, 200), want{class: ClassTransient, kind: KindUnknown, status: 502}},
		{"transport canceled", o(TransportCanceled, 0), want{class: ClassGateway, status: 499}},
		{"transport gateway", o(TransportGateway, 0), want{class: ClassGateway, status: 500}},
		{"transport unknown value", o(Transport(200), 0), want{class: ClassGateway, status: 500}},
	}
}

func TestClassify(t *testing.T) {
	var cases []classifyCase
	for _, set := range [][]classifyCase{openAICases(), responsesCases(), azureCases(), anthropicCases(), compatibleCases(), transportCases()} {
		cases = append(cases, set...)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Classify(tc.in, testNow())
			w := tc.want
			if got.Class != w.class || got.Kind != w.kind || got.Quota != w.quota || got.Status != w.status {
				t.Errorf("got %v/%q quota=%v status=%d, want %v/%q quota=%v status=%d",
					got.Class, got.Kind, got.Quota, got.Status, w.class, w.kind, w.quota, w.status)
			}
			if tc.in.Transport == TransportNone && (got.Type != w.typ || got.Code != w.code || got.Param != w.param) {
				t.Errorf("type/code/param = %q/%q/%q, want %q/%q/%q", got.Type, got.Code, got.Param, w.typ, w.code, w.param)
			}
			if got.RetryAfter != w.retryAfter {
				t.Errorf("RetryAfter = %v, want %v", got.RetryAfter, w.retryAfter)
			}
			if got.Message == "" || got.Message != Sanitize(got.Message) {
				t.Errorf("message %q is empty or not sanitised", got.Message)
			}
			if w.msg != "" && !strings.Contains(got.Message, w.msg) {
				t.Errorf("message %q does not contain %q", got.Message, w.msg)
			}
			if w.secret != "" && strings.Contains(got.Message, w.secret) {
				t.Errorf("message %q leaks %q", got.Message, w.secret)
			}
		})
	}
}

func TestClassifySuccess(t *testing.T) {
	for _, st := range []int{200, 201, 204} {
		got := Classify(Outcome{Provider: ProviderOpenAI, Status: st}, testNow())
		if got != (Classification{Status: st}) {
			t.Errorf("status %d: got %+v, want success", st, got)
		}
	}
}

// Succeeded is the caller's licence to leave a success's headers and body out: where it
// holds, they change nothing; an in-band error, a transport failure and an HTTP error are
// not successes.
func TestSucceededOutcomesIgnoreHeadersAndBody(t *testing.T) {
	hdr := http.Header{"Retry-After": {"30"}}
	body := []byte(`{"error":{"message":"quota","type":"insufficient_quota"}}`)
	for _, c := range []struct {
		o    Outcome
		want bool
	}{
		{Outcome{Status: 200}, true}, {Outcome{Status: 299}, true}, {Outcome{Status: 200, InBand: true}, false},
		{Outcome{Status: 429}, false}, {Outcome{Status: 200, Transport: TransportConnect}, false},
		{Outcome{Status: 500}, false}, {Outcome{Status: 199}, false},
	} {
		o := c.o
		o.Provider = ProviderOpenAI
		full := o
		full.Header, full.Body = hdr, body
		if o.Succeeded() != c.want {
			t.Errorf("%+v: Succeeded %v, want %v", o, o.Succeeded(), c.want)
		}
		if o.Succeeded() && Classify(o, testNow()) != Classify(full, testNow()) {
			t.Errorf("%+v: headers or body changed a success's verdict", o)
		}
	}
}

// The verdict must not depend on the body aliasing: callers reuse their buffers.
func TestClassifyDoesNotAliasBody(t *testing.T) {
	body := []byte(`{"error":{"message":"Rate limit reached.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`)
	got := Classify(Outcome{Provider: ProviderOpenAI, Status: 429, Body: body}, testNow())
	for i := range body {
		body[i] = 'x'
	}
	if got.Code != "rate_limit_exceeded" || got.Type != "tokens" || got.Message != "Rate limit reached." {
		t.Errorf("fields changed with the caller's buffer: %+v", got)
	}
}
