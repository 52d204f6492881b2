package dialect_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchyard-gw/switchyard/extproc/dialect"
	"github.com/switchyard-gw/switchyard/routing"
	"github.com/switchyard-gw/switchyard/routing/config"
)

// tok is the estimate for a prompt of n bytes of raw JSON text (estimate.go).
func tok(n int) int64 { return int64((n + dialect.BytesPerToken - 1) / dialect.BytesPerToken) }

const media = dialect.MediaPartTokens

func TestParse(t *testing.T) {
	const (
		chatMsgs   = `[{"role":"user","content":"hi"}]`
		tools      = `[{"type":"function","function":{"name":"f","parameters":{}}}]`
		imgPart    = `{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}`
		audioPart  = `{"type":"input_audio","input_audio":{"data":"UklGRiQAAABXQVZF","format":"wav"}}`
		chatMedia  = `[{"role":"user","content":[{"type":"text","text":"look"},` + imgPart + `,` + audioPart + `]}]`
		respImg    = `{"type":"input_image","image_url":"https://x/y.png"}`
		respFile   = `{"type":"input_file","file_id":"file-1"}`
		respInput  = `[{"role":"user","content":[{"type":"input_text","text":"read"},` + respImg + `,` + respFile + `]}]`
		anthImg    = `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}`
		anthDoc    = `{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}`
		anthTool   = `{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"ok"},` + anthImg + `]}`
		anthMsgs   = `[{"role":"user","content":[{"type":"text","text":"q"},` + anthDoc + `,` + anthTool + `]}]`
		anthTools  = `[{"name":"get_weather","input_schema":{"type":"object"}}]`
		anthSystem = `"be brief"`
		respOutImg = `{"type":"input_image","image_url":"u"}`
		respAudio  = `{"type":"input_audio","input_audio":{"data":"x","format":"mp3"}}`
		respNested = `[{"type":"function_call_output","call_id":"c","output":[` + respOutImg + `]},{"role":"user","content":[` + respAudio + `]}]`
	)
	type want struct {
		req routing.Facts
		// model, stream, op checked beside Facts
		model  string
		stream bool
		op     config.Operation
	}
	for _, tc := range []struct {
		name string
		d    dialect.Dialect
		body string
		want want
	}{
		{"chat minimal", dialect.Chat, `{"model":"gpt-4o","messages":` + chatMsgs + `}`,
			want{model: "gpt-4o", req: routing.Facts{PromptTokens: tok(len(chatMsgs))}}},
		{"chat stream with usage, tools, parallel, json_schema, max_completion_tokens wins", dialect.Chat,
			`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"max_tokens":10,"max_completion_tokens":512,` +
				`"messages":` + chatMsgs + `,"tools":` + tools + `,"parallel_tool_calls":true,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{}}}}`,
			want{model: "gpt-4o", stream: true, req: routing.Facts{Tools: true, ParallelToolCalls: true, StructuredOutput: true,
				MaxOutputTokens: 512, PromptTokens: tok(len(chatMsgs) + len(tools))}}},
		{"chat max_tokens alone; json_object is not json_schema; include_usage without stream", dialect.Chat,
			`{"model":"m","max_tokens":7,"stream_options":{"include_usage":true},"response_format":{"type":"json_object"},"messages":` + chatMsgs + `}`,
			want{model: "m", req: routing.Facts{MaxOutputTokens: 7, PromptTokens: tok(len(chatMsgs))}}},
		{"chat null max_completion_tokens leaves max_tokens", dialect.Chat,
			`{"model":"m","max_tokens":7,"max_completion_tokens":null}`,
			want{model: "m", req: routing.Facts{MaxOutputTokens: 7}}},
		{"tools are no embeddings field; functions only Chat's", dialect.Embeddings,
			`{"model":"e","tools":[{"type":"x"}]}`,
			want{model: "e", op: config.OpEmbeddings}},
		{"functions are not a Responses field", dialect.Responses,
			`{"model":"m","functions":[{"name":"f"}]}`,
			want{model: "m"}},
		{"chat deprecated max_tokens after max_completion_tokens does not win", dialect.Chat,
			`{"model":"m","max_completion_tokens":100,"max_tokens":7}`,
			want{model: "m", req: routing.Facts{MaxOutputTokens: 100}}},
		{"chat parallel_tool_calls without tools is no need; empty tools", dialect.Chat,
			`{"model":"m","tools":[ ],"parallel_tool_calls":true}`,
			want{model: "m", req: routing.Facts{PromptTokens: tok(3)}}},
		{"chat tools with parallel default (unset) asks nothing", dialect.Chat,
			`{"model":"m","tools":` + tools + `}`,
			want{model: "m", req: routing.Facts{Tools: true, PromptTokens: tok(len(tools))}}},
		{"chat legacy functions are tools", dialect.Chat,
			`{"model":"m","functions":[{"name":"f"}]}`,
			want{model: "m", req: routing.Facts{Tools: true, PromptTokens: tok(len(`[{"name":"f"}]`))}}},
		{"chat image and audio parts; media bytes not counted as text", dialect.Chat,
			`{"model":"m","messages":` + chatMedia + `}`,
			want{model: "m", req: routing.Facts{Modalities: config.ModalityImage | config.ModalityAudio,
				PromptTokens: tok(len(chatMedia)-len(imgPart)-len(audioPart)) + 2*media}}},
		{"chat stream false, null fields", dialect.Chat, `{"model":"m","stream":false,"max_tokens":null,"stream_options":null}`,
			want{model: "m"}},
		{"chat ignores responses/anthropic fields", dialect.Chat,
			`{"model":"m","max_output_tokens":9,"text":{"format":{"type":"json_schema"}},"input":"xxxxxxxx","system":"yyyy"}`,
			want{model: "m"}},
		{"responses", dialect.Responses,
			`{"model":"gpt-5","stream":true,"stream_options":{"include_usage":true},"instructions":"be nice","input":` + respInput +
				`,"tools":[{"type":"web_search"}],"parallel_tool_calls":true,"text":{"format":{"type":"json_schema","name":"x","schema":{}}},"max_output_tokens":300}`,
			want{model: "gpt-5", stream: true, req: routing.Facts{Tools: true, ParallelToolCalls: true, StructuredOutput: true,
				MaxOutputTokens: 300, Modalities: config.ModalityImage,
				PromptTokens: tok(len(`"be nice"`)+len(respInput)-len(respImg)-len(respFile)+len(`[{"type":"web_search"}]`)) + 2*media}}},
		{"responses string input; response_format and max_tokens are not Responses fields", dialect.Responses,
			`{"model":"m","input":"hello there","max_tokens":5,"response_format":{"type":"json_schema"}}`,
			want{model: "m", req: routing.Facts{PromptTokens: tok(len(`"hello there"`))}}},
		{"responses audio; function_call_output with an image", dialect.Responses,
			`{"model":"m","input":` + respNested + `}`,
			want{model: "m", req: routing.Facts{Modalities: config.ModalityImage | config.ModalityAudio,
				PromptTokens: tok(len(respNested)-len(respOutImg)-len(respAudio)) + 2*media}}},
		{"messages", dialect.Messages,
			`{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"system":` + anthSystem + `,"messages":` + anthMsgs +
				`,"tools":` + anthTools + `,"tool_choice":{"type":"auto","disable_parallel_tool_use":false},"output_config":{"format":{"type":"json_schema","schema":{}}}}`,
			want{model: "claude-sonnet-4-5", stream: true, req: routing.Facts{Tools: true, ParallelToolCalls: true, StructuredOutput: true,
				MaxOutputTokens: 1024, Modalities: config.ModalityImage,
				PromptTokens: tok(len(anthSystem)+len(anthMsgs)-len(anthDoc)-len(anthImg)+len(anthTools)) + 2*media}}},
		{"messages: parallel not disabled is no explicit need; beta output_format; max_tokens 0", dialect.Messages,
			`{"model":"c","max_tokens":0,"messages":[],"tools":` + anthTools + `,"tool_choice":{"type":"auto"},"output_format":{"type":"json_schema"}}`,
			want{model: "c", req: routing.Facts{Tools: true, StructuredOutput: true, PromptTokens: tok(2 + len(anthTools))}}},
		{"messages disable_parallel_tool_use true", dialect.Messages,
			`{"model":"c","max_tokens":1,"tools":` + anthTools + `,"tool_choice":{"disable_parallel_tool_use":true},"parallel_tool_calls":true}`,
			want{model: "c", req: routing.Facts{Tools: true, MaxOutputTokens: 1, PromptTokens: tok(len(anthTools))}}},
		{"embeddings string; stream ignored", dialect.Embeddings, `{"model":"text-embedding-3-small","input":"twelve bytes","stream":true}`,
			want{model: "text-embedding-3-small", op: config.OpEmbeddings, req: routing.Facts{PromptTokens: 3}}},
		{"embeddings strings and token ids", dialect.Embeddings, `{"model":"e","input":["abcd","efgh",[1,2,3],7]}`,
			want{model: "e", op: config.OpEmbeddings, req: routing.Facts{PromptTokens: 2 + 4}}},
		{"embeddings token array", dialect.Embeddings, `{"model":"e","input":[1,2,3,4,5]}`,
			want{model: "e", op: config.OpEmbeddings, req: routing.Facts{PromptTokens: 5}}},
		{"huge max_tokens is capped", dialect.Messages, `{"model":"c","max_tokens":1e300}`,
			want{model: "c", req: routing.Facts{MaxOutputTokens: 1 << 40}}},
		{"leading whitespace", dialect.Chat, " \n\t{\"model\":\"m\"}", want{model: "m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dialect.Parser{MaxBodyBytes: 1 << 20}.Parse(tc.d, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			w := dialect.Request{Dialect: tc.d, Model: tc.want.model, Stream: tc.want.stream,
				Operation: tc.want.op, Facts: tc.want.req}
			w.Facts.API = tc.d.API() // the API a deployment must speak
			if got != w {
				t.Errorf("Parse =\n %+v\nwant\n %+v", got, w)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	long := `{"model":"m","messages":"` + strings.Repeat("x", 100) + `"}`
	for _, tc := range []struct {
		name   string
		d      dialect.Dialect
		body   string
		status int
		code   string
		param  string
	}{
		{"not JSON", dialect.Chat, `model=gpt-4o`, 400, dialect.CodeInvalidJSON, ""},
		{"truncated JSON", dialect.Messages, `{"model":"c","max_tokens":1`, 400, dialect.CodeInvalidJSON, ""},
		{"array, not object", dialect.Responses, `[{"model":"m"}]`, 400, dialect.CodeInvalidJSON, ""},
		{"empty", dialect.Embeddings, ``, 400, dialect.CodeInvalidJSON, ""},
		{"trailing garbage", dialect.Chat, `{"model":"m"} x`, 400, dialect.CodeInvalidJSON, ""},
		{"missing model", dialect.Chat, `{"messages":[]}`, 404, dialect.CodeModelNotFound, "model"},
		{"empty model", dialect.Messages, `{"model":"","max_tokens":1}`, 404, dialect.CodeModelNotFound, "model"},
		{"null model", dialect.Responses, `{"model":null}`, 404, dialect.CodeModelNotFound, "model"},
		{"numeric model", dialect.Chat, `{"model":4}`, 400, dialect.CodeInvalidRequest, "model"},
		{"string stream", dialect.Chat, `{"model":"m","stream":"true"}`, 400, dialect.CodeInvalidRequest, "stream"},
		{"negative max_tokens", dialect.Messages, `{"model":"m","max_tokens":-1}`, 400, dialect.CodeInvalidRequest, "max_tokens"},
		{"fractional max_output_tokens", dialect.Responses, `{"model":"m","max_output_tokens":1.5}`, 400, dialect.CodeInvalidRequest, "max_output_tokens"},
		{"string max_completion_tokens", dialect.Chat, `{"model":"m","max_completion_tokens":"9"}`, 400, dialect.CodeInvalidRequest, "max_completion_tokens"},
		{"over the limit", dialect.Chat, long, 413, dialect.CodeRequestTooLarge, ""},
		{"duplicate model", dialect.Chat, `{"model":"cheap","model":"dear"}`, 400, dialect.CodeInvalidRequest, "model"},
		{"duplicate stream", dialect.Messages, `{"model":"c","stream":false,"stream":true}`, 400, dialect.CodeInvalidRequest, "stream"},
		{"duplicate escaped key", dialect.Responses, `{"model":"a","mod\u0065l":"b"}`, 400, dialect.CodeInvalidRequest, "model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dialect.Parser{MaxBodyBytes: 100}.Parse(tc.d, []byte(tc.body))
			var e *dialect.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *dialect.Error", err)
			}
			if e.Status != tc.status || e.Code != tc.code || e.Param != tc.param || e.Family != tc.d.Family() || e.Message == "" {
				t.Errorf("err = %+v, want %d %s param %q in %v", e, tc.status, tc.code, tc.param, tc.d.Family())
			}
		})
	}
}

func TestParseLimitIsInclusive(t *testing.T) {
	body := []byte(`{"model":"m"}`)
	p := dialect.Parser{MaxBodyBytes: len(body)}
	if _, err := p.Parse(dialect.Chat, body); err != nil {
		t.Fatalf("a body of exactly the limit: %v", err)
	}
	if err := p.CheckLength(dialect.Messages, int64(len(body))); err != nil {
		t.Fatalf("CheckLength at the limit: %v", err)
	}
	var e *dialect.Error
	if err := p.CheckLength(dialect.Messages, int64(len(body)+1)); !errors.As(err, &e) || e.Status != 413 || e.Family != dialect.Anthropic {
		t.Fatalf("CheckLength over the limit = %v", err)
	}
	if err := (dialect.Parser{}).CheckLength(dialect.Chat, 1<<40); err != nil {
		t.Fatalf("no limit: %v", err)
	}
}

// TestParseDoesNotKeepTheBody: the model survives the caller reusing its buffer.
func TestParseDoesNotKeepTheBody(t *testing.T) {
	body := []byte(`{"model":"gpt-4o"}`)
	r, err := dialect.Parser{}.Parse(dialect.Chat, body)
	if err != nil {
		t.Fatal(err)
	}
	copy(body, `{"model":"XXXXXX"}`)
	if r.Model != "gpt-4o" {
		t.Fatalf("model changed with the buffer: %q", r.Model)
	}
}
