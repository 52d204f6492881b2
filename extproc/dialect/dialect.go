package dialect

import (
	"github.com/switchyard-gw/switchyard/routing"
	"net/http"
	"net/url"
	"strings"
)

// Dialect is a client-side API whose requests switchyard routes.
type Dialect uint8

const (
	// None: not a routed API (the models listing, an unknown path).
	None Dialect = iota
	// Chat is OpenAI Chat Completions, POST /v1/chat/completions.
	Chat
	// Responses is OpenAI Responses, POST /v1/responses.
	Responses
	// Embeddings is OpenAI embeddings, POST /v1/embeddings.
	Embeddings
	// Messages is Anthropic Messages, POST /v1/messages.
	Messages
)

func (d Dialect) String() string {
	switch d {
	case Chat:
		return "openai-chat"
	case Responses:
		return "openai-responses"
	case Embeddings:
		return "openai-embeddings"
	case Messages:
		return "anthropic-messages"
	default:
		return "none"
	}
}

// Family is the error and listing shape a client understands (behaviour §13.1).
type Family uint8

const (
	// OpenAI: {"error":{"message","type","param","code"}}.
	OpenAI Family = iota
	// Anthropic: {"type":"error","error":{"type","message"}}.
	Anthropic
)

func (f Family) String() string {
	if f == Anthropic {
		return "anthropic"
	}
	return "openai"
}

// Family is the shape of d's errors.
func (d Dialect) Family() Family {
	if d == Messages {
		return Anthropic
	}
	return OpenAI
}

// API is the wire API of d, which a deployment's provider must speak (routing.Speaks).
func (d Dialect) API() routing.API {
	switch d {
	case Messages:
		return routing.APIAnthropic
	case Chat, Responses, Embeddings:
		return routing.APIOpenAI
	}
	return routing.APIAny
}

// Op is what a request asks switchyard to do.
type Op uint8

const (
	// OpCreate: a routed POST to Route.Dialect's endpoint.
	OpCreate Op = iota + 1
	// OpListModels: GET /v1/models, answered by switchyard itself.
	OpListModels
	// OpGetModel: GET /v1/models/{id}, answered by switchyard itself.
	OpGetModel
)

// Route is what a request's method, path and headers name.
type Route struct {
	Op      Op
	Dialect Dialect // set for OpCreate
	// Family is the shape of every answer switchyard itself gives this request.
	Family Family
	// ModelID is the {id} of OpGetModel, percent-decoded; it may contain '/'.
	ModelID string
}

// endpoint is the dialect routed at path, or None.
func endpoint(path string) Dialect {
	switch path {
	case "/v1/chat/completions":
		return Chat
	case "/v1/responses":
		return Responses
	case "/v1/embeddings":
		return Embeddings
	case "/v1/messages":
		return Messages
	}
	return None
}

const modelsPath = "/v1/models"

// Match names the request for method and path (Envoy's :method and :path, which carries the
// query string; it is ignored). anthropicVersion is whether the request carries an
// anthropic-version header: it selects Anthropic's listing format for /v1/models, and the
// error shape of an unknown path. An unknown path or method is a *Error with status 404.
func Match(method, path string, anthropicVersion bool) (Route, error) {
	p, _, _ := strings.Cut(path, "?")
	if d := endpoint(p); d != None && method == http.MethodPost {
		return Route{Op: OpCreate, Dialect: d, Family: d.Family()}, nil
	}
	family := OpenAI
	if anthropicVersion || strings.HasPrefix(p, "/v1/messages") {
		family = Anthropic
	}
	if method == http.MethodGet {
		if p == modelsPath || p == modelsPath+"/" {
			return Route{Op: OpListModels, Family: family}, nil
		}
		if raw, ok := strings.CutPrefix(p, modelsPath+"/"); ok {
			id, err := url.PathUnescape(raw)
			if err == nil {
				return Route{Op: OpGetModel, Family: family, ModelID: id}, nil
			}
		}
	}
	return Route{}, UnknownPath(family, method, p)
}
