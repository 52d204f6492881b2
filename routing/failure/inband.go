package failure

import "strings"

// inBandStatus is the HTTP status equivalent to an error event inside a 200 stream, so that it
// is "classified like the equivalent HTTP error" (behaviour §8.5). The SDKs surface these with
// status 200 (docs/wire-formats.md §3.3, Summary 1), so the stream's status says nothing: the
// error's code, then its type, then a status the body carries, decide.
func inBandStatus(e *errorBody, p Provider, streamStatus int) int {
	if st := codeToStatus(e.code); st != 0 {
		return st
	}
	if st := typeToStatus(e.typ); st != 0 {
		return st
	}
	if e.status >= 400 {
		return e.status // Azure "code":"429", OpenRouter numeric codes
	}
	if streamStatus >= 400 && streamStatus <= 599 {
		return streamStatus
	}
	switch {
	case e.contextOverflow(), e.policy():
		return 400
	case e.quota(), e.rateLimited():
		return 429
	case e.overloaded():
		if p == ProviderAnthropic {
			return 529
		}
		return 503
	}
	// An unknown in-band error is a failure of the upstream's processing (openai-python raises
	// a plain APIError, "An error occurred during streaming"): a 500.
	return 500
}

// codeToStatus maps the error codes of docs/wire-formats.md §1.4 and the Responses ResponseError
// code enum (openai-python types/responses/response_error.py, §2.2) to their HTTP status.
func codeToStatus(code string) int {
	switch code {
	case "":
		return 0
	case "context_length_exceeded", "invalid_prompt", "content_filter", "content_policy_violation":
		return 400
	case "invalid_api_key":
		return 401
	case "model_not_found", "DeploymentNotFound":
		return 404
	case "rate_limit_exceeded", "insufficient_quota":
		return 429
	case "server_error":
		return 500
	case "server_is_overloaded", "slow_down":
		return 503
	case "vector_store_timeout":
		return 504
	}
	// The rest of the ResponseError enum (invalid_image, image_too_large, image_file_not_found,
	// failed_to_download_image, ...) are faults of the request's input.
	if strings.HasPrefix(code, "invalid_") || strings.Contains(code, "image") {
		return 400
	}
	return 0
}

// typeToStatus maps error types to their HTTP status: Anthropic's ErrorType enum
// (types/shared/error_type.py, mapping as docker/docker-agent PR #2880, docs/wire-formats.md §3.3)
// and OpenAI's types (§1.4: "tokens"/"requests" are the 429 limit dimension).
func typeToStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return 400
	case "authentication_error":
		return 401
	case "billing_error":
		return 402
	case "permission_error":
		return 403
	case "not_found_error":
		return 404
	case "request_too_large":
		return 413
	case "rate_limit_error", "tokens", "requests", "insufficient_quota":
		return 429
	case "api_error", "server_error":
		return 500
	case "service_unavailable_error":
		return 503
	case "timeout_error":
		return 504
	case "overloaded_error":
		return 529
	}
	return 0
}
