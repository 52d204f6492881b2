package dialect

import (
	"time"
)

// OwnedBy is the owned_by of every model switchyard lists in OpenAI's format.
const OwnedBy = "switchyard"

// openAIModel is one entry of OpenAI's GET /v1/models (openai-go Model).
type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// anthropicModel is one entry of Anthropic's GET /v1/models (anthropic-sdk-go ModelInfo).
type anthropicModel struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

// ModelsBody is the GET /v1/models answer listing the public models names, in f's format:
// OpenAI {"object":"list","data":[{"id","object":"model","created","owned_by"}]},
// Anthropic {"data":[{"type":"model","id","display_name","created_at"}],"has_more":false,
// "first_id","last_id"}. created is reported as every model's creation time (switchyard
// knows none better: the configuration's load time is a fair stand-in).
func ModelsBody(f Family, names []string, created time.Time) []byte {
	if f == Anthropic {
		data := make([]anthropicModel, len(names))
		for i, n := range names {
			data[i] = anthropicEntry(n, created)
		}
		var first, last *string
		if len(names) > 0 {
			first, last = &names[0], &names[len(names)-1]
		}
		return mustJSON(struct {
			Data    []anthropicModel `json:"data"`
			HasMore bool             `json:"has_more"`
			FirstID *string          `json:"first_id"`
			LastID  *string          `json:"last_id"`
		}{data, false, first, last})
	}
	data := make([]openAIModel, len(names))
	for i, n := range names {
		data[i] = openAIEntry(n, created)
	}
	return mustJSON(struct {
		Object string        `json:"object"`
		Data   []openAIModel `json:"data"`
	}{"list", data})
}

// ModelBody is the GET /v1/models/{id} answer for the public model name, in f's format.
// For a model switchyard does not serve, answer ModelNotFound.
func ModelBody(f Family, name string, created time.Time) []byte {
	if f == Anthropic {
		return mustJSON(anthropicEntry(name, created))
	}
	return mustJSON(openAIEntry(name, created))
}

func openAIEntry(name string, created time.Time) openAIModel {
	return openAIModel{ID: name, Object: "model", Created: created.Unix(), OwnedBy: OwnedBy}
}

func anthropicEntry(name string, created time.Time) anthropicModel {
	return anthropicModel{Type: "model", ID: name, DisplayName: name, CreatedAt: created.UTC().Format(time.RFC3339)}
}

// ModelsResponse is ModelsBody as a complete 200 answer.
func ModelsResponse(f Family, names []string, created time.Time) Response {
	return Response{Status: 200, Headers: []Header{{HeaderContentType, jsonContentType}}, Body: ModelsBody(f, names, created)}
}

// ModelResponse is ModelBody as a complete 200 answer.
func ModelResponse(f Family, name string, created time.Time) Response {
	return Response{Status: 200, Headers: []Header{{HeaderContentType, jsonContentType}}, Body: ModelBody(f, name, created)}
}
