package fakeprovider

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// endpoint is the API a request is for.
type endpoint int

const (
	epChat endpoint = iota + 1
	epResponses
	epEmbeddings
	epMessages
)

// route is what admission learned about a request.
type route struct {
	ep endpoint
	// model is the body "model", or the Azure deployment; faults match on it.
	model string
	// respModel is the model reported in response bodies (Azure maps deployments).
	respModel  string
	stream     bool
	apiVersion string
	// key is the credential presented, for the masked 401 message.
	key string
}

// admit routes the request and checks auth and the body the way the provider would,
// returning the provider's error if it would refuse the request.
func (x *exchange) admit() *apiError {
	x.route.model = gjson.GetBytes(x.body, "model").String()
	x.route.stream = gjson.GetBytes(x.body, "stream").Bool()
	switch x.s.opts.Kind {
	case Azure:
		return x.admitAzure()
	case Anthropic:
		return x.admitAnthropic()
	default:
		return x.admitOpenAI()
	}
}

func reject(e apiError) *apiError { return &e }

func (x *exchange) admitOpenAI() *apiError {
	r := x.r
	eps := map[string]endpoint{
		"/v1/chat/completions": epChat,
		"/v1/responses":        epResponses,
		"/v1/embeddings":       epEmbeddings,
	}
	ep, ok := eps[r.URL.Path]
	if !ok || r.Method != http.MethodPost {
		return reject(openAIError(http.StatusNotFound, "invalid_request_error", "", "",
			fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)))
	}
	x.route.ep = ep
	x.route.key, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if want := x.s.opts.APIKey; want != "" {
		if x.route.key == "" {
			return reject(openAIError(http.StatusUnauthorized, "invalid_request_error", "", "",
				"You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're accessing the API from your browser and are prompted for a username and password. You can obtain an API key from https://platform.openai.com/account/api-keys."))
		}
		if x.route.key != want {
			return reject(x.openAIKindError(Unauthorized, nil))
		}
	}
	if !gjson.ValidBytes(x.body) {
		return reject(openAIError(http.StatusBadRequest, "invalid_request_error", "", "",
			"We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"))
	}
	if x.route.model == "" {
		return reject(openAIError(http.StatusBadRequest, "invalid_request_error", "", "model",
			"you must provide a model parameter"))
	}
	if len(x.s.opts.Models) > 0 && !slices.Contains(x.s.opts.Models, x.route.model) {
		return reject(x.openAIKindError(NotFound, nil))
	}
	x.route.respModel = x.route.model
	return nil
}

// admitAzure serves the deployment-scoped routes, which need ?api-version and take the
// deployment from the path, and the routes openai-python's lib/azure.py sends without a
// deployment segment (/openai/responses, /openai/v1/…), which take it from "model"
// (wire-formats §4.1).
func (x *exchange) admitAzure() *apiError {
	r := x.r
	// Azure answers unknown routes, and a missing api-version, with a bare 404 "Resource
	// not found" (MicrosoftDocs/azure-docs#114602).
	notFound := reject(azureError(http.StatusNotFound, "404", "Resource not found"))
	if r.Method != http.MethodPost {
		return notFound
	}
	x.route.apiVersion = r.URL.Query().Get("api-version")
	deployment, needVersion := "", true
	switch rest, ok := strings.CutPrefix(r.URL.Path, "/openai/deployments/"); {
	case ok:
		dep, op, _ := strings.Cut(rest, "/")
		switch op {
		case "chat/completions":
			x.route.ep = epChat
		case "embeddings":
			x.route.ep = epEmbeddings
		default:
			return notFound
		}
		deployment = dep
	case r.URL.Path == "/openai/responses":
		x.route.ep = epResponses
	case r.URL.Path == "/openai/v1/chat/completions":
		x.route.ep, needVersion = epChat, false
	case r.URL.Path == "/openai/v1/responses":
		x.route.ep, needVersion = epResponses, false
	case r.URL.Path == "/openai/v1/embeddings":
		x.route.ep, needVersion = epEmbeddings, false
	default:
		return notFound
	}
	if needVersion && x.route.apiVersion == "" {
		return notFound
	}
	x.route.key = r.Header.Get("api-key")
	if x.route.key == "" {
		x.route.key, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if want := x.s.opts.APIKey; want != "" && x.route.key != want {
		return reject(x.azureKindError(Unauthorized, nil))
	}
	if !gjson.ValidBytes(x.body) {
		e := openAIError(http.StatusBadRequest, "invalid_request_error", "", "", "Invalid JSON body.")
		e.kind = Azure
		return reject(e)
	}
	if deployment == "" {
		deployment = x.route.model
	}
	if deployment == "" {
		e := openAIError(http.StatusBadRequest, "invalid_request_error", "", "model", "you must provide a model parameter")
		e.kind = Azure
		return reject(e)
	}
	// The deployment name routes the request; the body model is ignored (§4.1).
	x.route.model, x.route.respModel = deployment, deployment
	if deps := x.s.opts.Deployments; deps != nil {
		m, ok := deps[deployment]
		if !ok {
			return reject(x.azureKindError(NotFound, nil))
		}
		if m != "" {
			x.route.respModel = m
		}
	}
	return nil
}

// admitAnthropic checks x-api-key (or Bearer) and anthropic-version, and the required
// body fields model, max_tokens, messages (wire-formats §3.1).
func (x *exchange) admitAnthropic() *apiError {
	r := x.r
	rid := x.requestID()
	if r.URL.Path != "/v1/messages" || r.Method != http.MethodPost {
		return reject(anthropicError(http.StatusNotFound, "not_found_error", "Not Found", rid))
	}
	x.route.ep = epMessages
	x.route.key = r.Header.Get("x-api-key")
	if x.route.key == "" {
		x.route.key, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if want := x.s.opts.APIKey; want != "" {
		if x.route.key == "" {
			return reject(anthropicError(http.StatusUnauthorized, "authentication_error", "x-api-key header is required", rid))
		}
		if x.route.key != want {
			return reject(x.anthropicKindError(Unauthorized, nil))
		}
	}
	// Seen verbatim with a request_id in envoyproxy/ai-gateway#1909.
	if r.Header.Get("anthropic-version") == "" {
		return reject(anthropicError(http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required", rid))
	}
	if !gjson.ValidBytes(x.body) {
		return reject(anthropicError(http.StatusBadRequest, "invalid_request_error", "There was an error parsing the body of your request as JSON.", rid))
	}
	for _, field := range []string{"model", "max_tokens", "messages"} {
		if !gjson.GetBytes(x.body, field).Exists() {
			return reject(anthropicError(http.StatusBadRequest, "invalid_request_error", field+": Field required", rid))
		}
	}
	if len(x.s.opts.Models) > 0 && !slices.Contains(x.s.opts.Models, x.route.model) {
		return reject(x.anthropicKindError(NotFound, nil))
	}
	x.route.respModel = x.route.model
	return nil
}
