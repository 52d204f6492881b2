package fakeprovider

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/tidwall/sjson"
)

// apiError is a provider-shaped error answer: status, JSON body and extra headers.
type apiError struct {
	status int
	body   []byte
	header http.Header
	kind   Kind
}

// withMessage replaces error.message, which all three dialects use.
func (e apiError) withMessage(msg string) apiError {
	return e.set("error.message", msg)
}

func (e apiError) set(path, value string) apiError {
	if b, err := sjson.SetBytes(e.body, path, value); err == nil {
		e.body = b
	}
	return e
}

// patched applies a fault's overrides. Anthropic has no error.code or error.param; its
// machine-readable code lives in error.details.error_code
// (anthropic-sdk-go internal/apierror/apierror.go ErrorCode).
func (e apiError) patched(f *Fault) apiError {
	if f == nil {
		return e
	}
	if f.Status != 0 {
		e.status = f.Status
	}
	if f.Type != "" {
		e = e.set("error.type", f.Type)
	}
	if f.Message != "" {
		e = e.withMessage(f.Message)
	}
	if f.Code != "" {
		if e.kind == Anthropic {
			e = e.set("error.details.error_code", f.Code)
		} else {
			e = e.set("error.code", f.Code)
		}
	}
	if f.Param != "" && e.kind != Anthropic {
		e = e.set("error.param", f.Param)
	}
	if f.Body != "" {
		e.body = []byte(f.Body)
	}
	return e
}

// openAIError is OpenAI's {"error":{message,type,param,code}}; empty strings are null
// (wire-formats §1.4, openai-go internal/apierror/apierror.go).
func openAIError(status int, typ, code, param, msg string) apiError {
	b := []byte(`{"error":{"message":"","type":null,"param":null,"code":null}}`)
	b, _ = sjson.SetBytes(b, "error.message", msg)
	for path, v := range map[string]string{"error.type": typ, "error.code": code, "error.param": param} {
		if v != "" {
			b, _ = sjson.SetBytes(b, path, v)
		}
	}
	return apiError{status: status, body: b, header: http.Header{}, kind: OpenAI}
}

// azureError is Azure's {"error":{"code":"<often the status>","message":…}} with no type
// (wire-formats §4.3).
func azureError(status int, code, msg string) apiError {
	b := []byte(`{"error":{"code":"","message":""}}`)
	b, _ = sjson.SetBytes(b, "error.code", code)
	b, _ = sjson.SetBytes(b, "error.message", msg)
	return apiError{status: status, body: b, header: http.Header{}, kind: Azure}
}

// anthropicError is {"type":"error","error":{type,message},"request_id":…}
// (wire-formats §3.4, anthropic-sdk types/shared/error_response).
func anthropicError(status int, typ, msg, requestID string) apiError {
	b := []byte(`{"type":"error","error":{"type":"","message":""},"request_id":""}`)
	b, _ = sjson.SetBytes(b, "error.type", typ)
	b, _ = sjson.SetBytes(b, "error.message", msg)
	b, _ = sjson.SetBytes(b, "request_id", requestID)
	return apiError{status: status, body: b, header: http.Header{}, kind: Anthropic}
}

// retrySeconds is the wait quoted in rate-limit messages: the fault's numeric RetryAfter,
// else def.
func retrySeconds(f *Fault, def string) string {
	if f != nil {
		if _, err := strconv.ParseFloat(f.RetryAfter, 64); err == nil {
			return f.RetryAfter
		}
	}
	return def
}

// errorFor renders kind in the exchange's dialect and applies the fault's overrides.
func (x *exchange) errorFor(kind ErrorKind, f *Fault) apiError {
	var e apiError
	switch x.s.opts.Kind {
	case Azure:
		e = x.azureKindError(kind, f)
	case Anthropic:
		e = x.anthropicKindError(kind, f)
	default:
		e = x.openAIKindError(kind, f)
	}
	return e.patched(f)
}

func (x *exchange) openAIKindError(kind ErrorKind, f *Fault) apiError {
	model := x.route.model
	switch kind {
	case RateLimited:
		wait := retrySeconds(f, "3.89")
		e := openAIError(http.StatusTooManyRequests, "tokens", "rate_limit_exceeded", "", fmt.Sprintf(
			"Rate limit reached for %s in organization org-fake on tokens per min (TPM): Limit 30000, Used 28039, Requested 3906. Please try again in %ss. Visit https://platform.openai.com/account/rate-limits to learn more.", model, wait))
		// The x-ratelimit-* headers are the reliable retry hint on OpenAI 429s
		// (wire-formats §1.4 "Rate-limit headers").
		e.header.Set("x-ratelimit-remaining-tokens", "0")
		e.header.Set("x-ratelimit-reset-tokens", wait+"s")
		return e
	case QuotaExhausted:
		return openAIError(http.StatusTooManyRequests, "insufficient_quota", "insufficient_quota", "",
			"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.")
	case ContextOverflow:
		if x.route.ep == epResponses {
			// Responses words it differently and points at "input" (wire-formats §2.2).
			return openAIError(http.StatusBadRequest, "invalid_request_error", "context_length_exceeded", "input",
				"Your input exceeds the context window of this model. Please adjust your input and try again.")
		}
		param := "messages"
		if x.route.ep == epEmbeddings {
			param = "input"
		}
		return openAIError(http.StatusBadRequest, "invalid_request_error", "context_length_exceeded", param,
			"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.")
	case ContentPolicy:
		return openAIError(http.StatusBadRequest, "invalid_request_error", "invalid_prompt", "",
			"Invalid prompt: your prompt was flagged as potentially violating our usage policy. Please try again with a different prompt: https://platform.openai.com/docs/guides/reasoning#advice-on-prompting")
	case Overloaded:
		return openAIError(http.StatusServiceUnavailable, "service_unavailable_error", "server_is_overloaded", "",
			"Our servers are currently overloaded. Please try again later.")
	case Unauthorized:
		return openAIError(http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "",
			fmt.Sprintf("Incorrect API key provided: %s. You can find your API key at https://platform.openai.com/account/api-keys.", maskKey(x.route.key)))
	case PermissionDenied:
		return openAIError(http.StatusForbidden, "request_forbidden", "unsupported_country_region_territory", "",
			"Country, region, or territory not supported")
	case NotFound:
		return openAIError(http.StatusNotFound, "invalid_request_error", "model_not_found", "",
			fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model))
	case BadRequest:
		return openAIError(http.StatusBadRequest, "invalid_request_error", "", "", "Invalid request.")
	default:
		return openAIError(http.StatusInternalServerError, "server_error", "", "",
			"The server had an error while processing your request. Sorry about that!")
	}
}

func (x *exchange) azureKindError(kind ErrorKind, f *Fault) apiError {
	operation := "ChatCompletions_Create"
	if x.route.ep == epEmbeddings {
		operation = "Embeddings_Create"
	}
	switch kind {
	case RateLimited:
		return azureError(http.StatusTooManyRequests, "429", fmt.Sprintf(
			"Requests to the %s Operation under Azure OpenAI API version %s have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after %s seconds. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit.",
			operation, x.route.apiVersion, retrySeconds(f, "6")))
	case QuotaExhausted:
		// A daily/quota limit shows up as "retry after 86400 seconds" (wire-formats §4.3).
		return azureError(http.StatusTooManyRequests, "429", fmt.Sprintf(
			"Requests to the %s Operation under Azure OpenAI API version %s have exceeded call rate limit of your current OpenAI S0 pricing tier. Please retry after %s seconds.",
			operation, x.route.apiVersion, retrySeconds(f, "86400")))
	case ContextOverflow:
		e := openAIError(http.StatusBadRequest, "invalid_request_error", "context_length_exceeded", "messages",
			"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.")
		e.kind = Azure
		return e
	case ContentPolicy:
		return azureContentFilterError()
	case Overloaded:
		// Azure's convention of the status number as code (wire-formats §4.3); the exact
		// wording of Azure's 503 is not documented there.
		return azureError(http.StatusServiceUnavailable, "503", "The service is temporarily unable to process your request. Please try again later.")
	case Unauthorized:
		return azureError(http.StatusUnauthorized, "401",
			"Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.")
	case PermissionDenied:
		return azureError(http.StatusForbidden, "PermissionDenied", "Principal does not have access to API/Operation.")
	case NotFound:
		return azureError(http.StatusNotFound, "DeploymentNotFound",
			"The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again.")
	case BadRequest:
		e := openAIError(http.StatusBadRequest, "invalid_request_error", "", "", "Invalid request.")
		e.kind = Azure
		return e
	default:
		return azureError(http.StatusInternalServerError, "500", "The server had an error while processing your request. Sorry about that!")
	}
}

// azureContentFilterError is the filtered-prompt 400 of wire-formats §4.2, in the
// concept doc's "innererror.content_filter_result" spelling.
func azureContentFilterError() apiError {
	b := []byte(`{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry. To learn more about our content filtering policies please read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":true,"severity":"high"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":true,"severity":"medium"}}}}}`)
	return apiError{status: http.StatusBadRequest, body: b, header: http.Header{}, kind: Azure}
}

func (x *exchange) anthropicKindError(kind ErrorKind, f *Fault) apiError {
	rid := x.requestID()
	switch kind {
	case RateLimited:
		e := anthropicError(http.StatusTooManyRequests, "rate_limit_error",
			"This request would exceed your account's rate limit. Please try again later.", rid)
		e.header.Set("anthropic-ratelimit-requests-remaining", "0")
		return e
	case QuotaExhausted:
		// A spend cap, not a rate limit: 429 with details.error_code
		// enforced_spend_limit_reached (anthropic-sdk-go internal/apierror/apierror.go
		// ErrorCodeEnforcedSpendLimitReached, "Returned with HTTP status 429").
		e := anthropicError(http.StatusTooManyRequests, "rate_limit_error",
			"You have reached your specified API usage limits. You will regain access on the first day of next month.", rid)
		return e.set("error.details.error_code", "enforced_spend_limit_reached")
	case ContextOverflow:
		return anthropicError(http.StatusBadRequest, "invalid_request_error", "prompt is too long: 207791 tokens > 200000 maximum", rid)
	case ContentPolicy:
		return anthropicError(http.StatusBadRequest, "invalid_request_error", "Output blocked by content filtering policy", rid)
	case Overloaded:
		// 529 responses carry x-should-retry: true (wire-formats §3.4 [OBS]).
		e := anthropicError(statusOverloaded, "overloaded_error", "Overloaded", rid)
		e.header.Set("x-should-retry", "true")
		return e
	case Unauthorized:
		return anthropicError(http.StatusUnauthorized, "authentication_error", "invalid x-api-key", rid)
	case PermissionDenied:
		return anthropicError(http.StatusForbidden, "permission_error", "Your API key does not have permission to use the specified resource.", rid)
	case NotFound:
		return anthropicError(http.StatusNotFound, "not_found_error", "model: "+x.route.model, rid)
	case BadRequest:
		return anthropicError(http.StatusBadRequest, "invalid_request_error", "Invalid request.", rid)
	default:
		return anthropicError(http.StatusInternalServerError, "api_error", "Internal server error", rid)
	}
}

// maskKey shows a key the way OpenAI's 401 message does: a prefix, stars, a suffix.
func maskKey(k string) string {
	if len(k) <= 8 {
		return "***"
	}
	return k[:3] + "*****" + k[len(k)-4:]
}
