package failure

import "strings"

// The predicates below read what a provider said beyond its status. Codes and types are
// trusted wherever they appear. Message text is a weaker signal, and a provider's message can
// echo the client's own input (OpenAI's 400s quote invalid values and IDs), so text may only
// refine a verdict within the request's own scope (which Request kind, which fallback chain),
// unless it is matched as a prefix of the message: a client cannot make a provider's message
// *start* with its input, and only prefix matches may escalate to verdicts that affect other
// requests (quota outage, throttle circuit, quarantine).

// contextOverflow reports a context-window refusal (docs/wire-formats.md Summary 4): OpenAI's code
// context_length_exceeded (also in-band on Responses, §2.2), and otherwise the message text,
// as LiteLLM's exception mapping does: OpenAI/Azure "This model's maximum context length is",
// Responses "exceeds the context window", Anthropic "prompt is too long: N tokens > M maximum"
// and "input length and `max_tokens` exceed context limit" (§3.4), LiteLLM's "prompt: length",
// and llama.cpp-style "exceeds the available context size" for OpenAI-compatible servers.
func (e *errorBody) contextOverflow() bool {
	if e.code == "context_length_exceeded" {
		return true
	}
	m := e.message
	return containsFold(m, "context length") ||
		containsFold(m, "context window") ||
		containsFold(m, "context limit") ||
		containsFold(m, "context size") ||
		containsFold(m, "prompt is too long") ||
		containsFold(m, "prompt: length")
}

// policy reports a content-policy refusal (docs/wire-formats.md Summary 7): Azure's 400
// code content_filter with innererror/inner_error code ResponsibleAIPolicyViolation (§4.2),
// OpenAI's invalid_prompt and content_policy_violation codes (§1.4, Responses §2.2), and the
// text LiteLLM matches: "violating our usage policy" and Azure's "content management policy".
func (e *errorBody) policy() bool {
	switch e.code {
	case "content_filter", "content_policy_violation", "invalid_prompt", "image_content_policy_violation":
		return true
	}
	if e.inner == "ResponsibleAIPolicyViolation" || e.typ == "content_policy_violation" {
		return true
	}
	m := e.message
	return containsFold(m, "usage polic") || containsFold(m, "content management polic")
}

// quota reports an exhausted quota or spend limit (docs/wire-formats.md Summary 5): OpenAI's
// insufficient_quota as type or code (older bodies have code null, §1.4), Anthropic's
// error.details.error_code enforced_spend_limit_reached (§3.5) and billing_error (402, SDK
// error_type.py), and Anthropic's 400 "Your credit balance is too low to access the Anthropic
// API" (an invalid_request_error in practice; [OBS] anthropics/claude-code#4208,
// continuedev/continue#5499). Text is matched as a prefix only (see above).
func (e *errorBody) quota() bool {
	if e.typ == "insufficient_quota" || e.code == "insufficient_quota" ||
		e.spend == "enforced_spend_limit_reached" || e.typ == "billing_error" {
		return true
	}
	return hasPrefixFold(e.message, "you exceeded your current quota") ||
		hasPrefixFold(e.message, "your credit balance is too low")
}

// rateLimited reports a rate limit on a status other than 429: OpenAI's code
// rate_limit_exceeded, or the message, as LiteLLM maps OpenAI's "rate limit" and "Request too
// large" text to RateLimitError whatever the status (docs/wire-formats.md §5). OpenAI's own messages
// start with "Rate limit reached for" and "Request too large for <model> ... on tokens per min"
// (§1.4). Prefix only (see above), so that a 400 quoting the client's input cannot open a
// throttle circuit; this also keeps Anthropic's 413 request_too_large ("Request exceeds the
// maximum allowed number of bytes") a Request fault.
func (e *errorBody) rateLimited() bool {
	return e.code == "rate_limit_exceeded" ||
		hasPrefixFold(e.message, "rate limit") || hasPrefixFold(e.message, "request too large for")
}

// overloaded reports an overload rather than a generic server error on a 5xx: Anthropic's
// overloaded_error (§3.3), OpenAI's service_unavailable_error / server_is_overloaded /
// slow_down (§1.4), or the word in the message (LiteLLM maps "Overloaded" for Anthropic).
func (e *errorBody) overloaded() bool {
	switch {
	case e.typ == "overloaded_error", e.typ == "service_unavailable_error",
		e.code == "server_is_overloaded", e.code == "slow_down":
		return true
	}
	return containsFold(e.message, "overloaded")
}

// missingModel reports whether a 404 is about the deployment's model or endpoint (a
// configuration fault) rather than about something the request referred to, such as a
// file, a previous_response_id or a vector store (a Request fault: quarantining a deployment
// because a client sent an unknown ID would let any client take deployments out).
// Configuration: OpenAI code model_not_found, Azure DeploymentNotFound (§1.4, §4.3), param
// "model", Anthropic not_found_error "model: <name>" ([OBS] the message starts with "model:"),
// OpenAI-compatible "model 'x' not found" / "The model `x` does not exist", and a bare 404 with
// no message or a stock one (Azure "Resource not found" for a wrong path or api-version,
// "404 page not found" from a wrong base URL).
func (e *errorBody) missingModel() bool {
	switch {
	case e.code == "model_not_found", e.code == "DeploymentNotFound", e.param == "model":
		return true
	}
	m := strings.TrimSpace(e.message)
	if hasPrefixFold(m, "model") || hasPrefixFold(m, "the model") || hasPrefixFold(m, "the api deployment") {
		return true
	}
	switch {
	case m == "", equalFold(m, "not found"), equalFold(m, "resource not found"),
		equalFold(m, "404 page not found"), equalFold(m, "404 not found"):
		return true
	}
	return false
}
