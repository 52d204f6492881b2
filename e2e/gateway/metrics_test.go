package gateway_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-gw/switchyard/e2e/fakeprovider"
	configv1 "github.com/switchyard-gw/switchyard/proto/switchyard/config/v1"
)

// series is one sample of a /metrics scrape: its name, labels and value.
type series struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads replica i's /metrics over HTTP, as Prometheus does.
func (g *gateway) scrape(i int) []series {
	g.t.Helper()
	resp, err := http.Get(g.replicas[i].metricsURL)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		g.t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	var out []series
	for line := range strings.SplitSeq(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			g.t.Fatalf("/metrics line %q: %v", line, err)
		}
		out = append(out, s)
	}
	return out
}

// parseSample reads one line of the Prometheus text format: name{l="v",…} value.
func parseSample(line string) (series, error) {
	s := series{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, strconv.ErrSyntax
	}
	s.name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for line[0] != '}' {
			eq := strings.IndexByte(line, '=')
			if eq < 0 || len(line) < eq+2 || line[eq+1] != '"' {
				return s, strconv.ErrSyntax
			}
			name := line[:eq]
			line = line[eq+2:]
			var v strings.Builder
			for {
				if line == "" {
					return s, strconv.ErrSyntax
				}
				c := line[0]
				line = line[1:]
				if c == '"' {
					break
				}
				if c == '\\' && line != "" {
					c, line = line[0], line[1:]
					if c == 'n' {
						c = '\n'
					}
				}
				v.WriteByte(c)
			}
			s.labels[name] = v.String()
			line = strings.TrimPrefix(line, ",")
		}
		line = line[1:]
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(line), 64)
	s.value = v
	return s, err
}

// sum adds the samples of name whose labels include want (k=v pairs); found is false when
// none matches.
func sum(ss []series, name string, want ...string) (total float64, found bool) {
next:
	for _, s := range ss {
		if s.name != name {
			continue
		}
		for i := 0; i+1 < len(want); i += 2 {
			if s.labels[want[i]] != want[i+1] {
				continue next
			}
		}
		total += s.value
		found = true
	}
	return total, found
}

// expect fails the test unless the samples of name with labels want add up to v.
func expect(t *testing.T, ss []series, v float64, name string, want ...string) {
	t.Helper()
	got, found := sum(ss, name, want...)
	if !found || got != v {
		t.Errorf("%s%v = %v (found %v), want %v", name, want, got, found, v)
	}
}

// TestMetricsAfterTraffic reads /metrics after real traffic through envoysim, the fake
// providers and two replicas (the route role on replica 0, the attempt role on replica
// 1), and checks the data plane's series and labels: attempts by outcome and class,
// requests answered with an error, moves, tokens, time to first token, stream anomalies
// (also listed in unified_routing), and the deployment gauges — circuit state, wait and
// attempts in flight — which every replica reads from the shared store at scrape time.
func TestMetricsAfterTraffic(t *testing.T) {
	g := startGateway(t, []deployment{
		{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI},
		{ID: "an", Model: "claude", ProviderModel: "claude-sonnet-4-5", Kind: fakeprovider.Anthropic},
		{ID: "down", Model: "broken", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI, Down: true},
	}, gatewayOptions{replicas: 2, settings: &configv1.RouterSettings{AllowedFails: proto.Uint32(0), CooldownSeconds: proto.Uint32(60)}})

	// A JSON chat and a stream written in 1-7 byte pieces, served by oa.
	if res, err := g.openai().Chat.Completions.New(ctxT(t), chat("gpt-4o")); err != nil || res.Choices[0].Message.Content != fullText {
		t.Fatalf("chat: %v", err)
	}
	if text, err := g.streamChat(t, option.WithHeader(fakeprovider.FaultHeader, "tiny-writes")); err != nil || text != fullText {
		t.Fatalf("tiny-writes stream: %q %v", text, err)
	}
	// A Chat stream without [DONE]: complete, with an anomaly.
	if text, err := g.streamChat(t, option.WithHeader(fakeprovider.FaultHeader, "nodone")); err != nil || text != fullText {
		t.Fatalf("stream without [DONE]: %q %v", text, err)
	}
	// An Anthropic stream without stop_reason: complete, its anomaly in unified_routing.
	ms := g.anthropic(anthropicHeader(fakeprovider.FaultHeader, "nostop"), anthropicHeader("x-unified-routing-metadata", "true")).
		Messages.NewStreaming(ctxT(t), anthropic.MessageNewParams{Model: "claude", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var unified string
	for ms.Next() {
		if u := gjson.Get(ms.Current().RawJSON(), "unified_routing"); u.Exists() {
			unified = u.Raw
		}
	}
	if err := ms.Err(); err != nil {
		t.Fatal(err)
	}
	if a := gjson.Get(unified, "anomalies").Array(); len(a) != 1 || a[0].String() != "no stop_reason: inferred end_turn" {
		t.Fatalf("unified_routing %s: want the inferred stop reason among its anomalies", unified)
	}
	// A deployment nobody answers: the request fails and its circuit opens.
	if _, err := g.openai().Chat.Completions.New(ctxT(t), chat("broken")); err == nil {
		t.Fatal("a request to a dead deployment succeeded")
	}
	// A stream held by the provider is in flight for both replicas and the status view.
	done := make(chan error, 1)
	go func() {
		s := g.openai(option.WithHeader(fakeprovider.FaultHeader, "stall=2s; stall-after=1")).Chat.Completions.NewStreaming(ctxT(t), chat("gpt-4o"))
		for s.Next() {
		}
		done <- s.Err()
	}()
	eventually(t, "the held stream in flight on both replicas", func() bool {
		a, _ := sum(g.scrape(0), "switchyard_deployment_attempts_in_flight", "switchyard_deployment", "oa")
		b, _ := sum(g.scrape(1), "switchyard_deployment_attempts_in_flight", "switchyard_deployment", "oa")
		return a == 1 && b == 1
	})
	if st := g.deploymentStatus(0, "gpt-4o", "oa"); st.InFlight != 1 || st.Circuit != "closed" {
		t.Errorf("status view of oa during the stream: %+v", st)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	eventually(t, "in-flight back to 0", func() bool { return g.inFlight("oa", "an", "down") == 0 })
	// The client has the whole stream before the attempt role records its end (the end of
	// the response goes out first): wait for the last thing recorded, the request's outcome.
	eventually(t, "the held stream counted as served", func() bool {
		n, _ := sum(g.scrape(1), "switchyard_requests_total", "gen_ai_request_model", "gpt-4o", "outcome", "served")
		return n >= 4
	})

	route, attempt := g.scrape(0), g.scrape(1)
	// The attempt role (replica 1) counts attempts, their duration, tokens and TTFT.
	expect(t, attempt, 4, "switchyard_attempts_total", "switchyard_deployment", "oa", "class", "none", "error_type", "")
	expect(t, attempt, 1, "switchyard_attempts_total", "switchyard_deployment", "an", "class", "none")
	expect(t, attempt, 4, "gen_ai_client_operation_duration_seconds_count",
		"gen_ai_request_model", "gpt-4o", "gen_ai_provider_name", "openai", "switchyard_deployment", "oa", "error_type", "")
	expect(t, attempt, 1, "gen_ai_client_operation_duration_seconds_count",
		"gen_ai_request_model", "claude", "gen_ai_provider_name", "anthropic", "switchyard_deployment", "an", "error_type", "")
	expect(t, attempt, 4, "gen_ai_client_token_usage_count", "switchyard_deployment", "oa", "gen_ai_token_type", "output")
	expect(t, attempt, 16, "gen_ai_client_token_usage_sum", "switchyard_deployment", "oa", "gen_ai_token_type", "output")
	expect(t, attempt, 48, "gen_ai_client_token_usage_sum", "switchyard_deployment", "oa", "gen_ai_token_type", "input")
	expect(t, attempt, 4, "gen_ai_client_token_usage_sum", "gen_ai_request_model", "claude", "gen_ai_provider_name", "anthropic", "gen_ai_token_type", "output")
	expect(t, attempt, 3, "gen_ai_server_time_to_first_token_seconds_count", "gen_ai_request_model", "gpt-4o", "switchyard_deployment", "oa")
	expect(t, attempt, 1, "gen_ai_server_time_to_first_token_seconds_count", "gen_ai_request_model", "claude", "switchyard_deployment", "an")
	expect(t, attempt, 1, "switchyard_stream_anomalies_total", "switchyard_deployment", "an", "kind", "no stop_reason: inferred end_turn")
	expect(t, attempt, 1, "switchyard_stream_anomalies_total", "switchyard_deployment", "oa", "kind", "no [DONE]")
	expect(t, attempt, 1, "switchyard_stream_anomalies_total", "switchyard_deployment", "oa")
	// The connection refused by "down" is told by the trampoline, which a load balancer
	// spreads over both replicas: a transient attempt that opened the circuit, on one of
	// them. The route role (replica 0) answers the error.
	both := append(append([]series{}, route...), attempt...)
	expect(t, both, 1, "switchyard_circuit_transitions_total", "switchyard_deployment", "down", "transition", "opened")
	expect(t, both, 1, "switchyard_attempts_total", "switchyard_deployment", "down", "class", "transient", "error_type", "connect")
	expect(t, both, 1, "gen_ai_client_operation_duration_seconds_count", "switchyard_deployment", "down", "error_type", "connect")
	// The attempt role sees that attempt's stream end without an answer (when it had
	// started it): released, not a second attempt.
	expect(t, both, 1, "switchyard_attempts_total", "switchyard_deployment", "down")
	if n, _ := sum(attempt, "switchyard_attempts_released_total", "switchyard_deployment", "down"); n > 1 {
		t.Errorf("one attempt released %v times", n)
	}
	expect(t, route, 1, "switchyard_requests_stopped_total", "gen_ai_request_model", "broken", "status", "502")
	// Requests by outcome: served counted where the answer streamed (the attempt role),
	// stopped where it was written (the route role).
	expect(t, attempt, 4, "switchyard_requests_total", "gen_ai_request_model", "gpt-4o", "outcome", "served")
	expect(t, attempt, 1, "switchyard_requests_total", "gen_ai_request_model", "claude", "outcome", "served")
	expect(t, route, 1, "switchyard_requests_total", "gen_ai_request_model", "broken", "outcome", "stopped")
	if _, found := sum(both, "switchyard_requests_total", "gen_ai_request_model", "gpt-4o", "outcome", "stopped"); found {
		t.Error("a served gpt-4o request was counted as stopped")
	}
	if _, found := sum(route, "switchyard_requests_stopped_total", "gen_ai_request_model", "gpt-4o"); found {
		t.Error("a served gpt-4o request was counted as stopped")
	}
	expect(t, route, 4, "switchyard_moves_total", "gen_ai_request_model", "gpt-4o", "move", "first")
	expect(t, route, 1, "switchyard_moves_total", "gen_ai_request_model", "claude", "move", "first")
	// Both replicas read the same deployment state from the store.
	for i, ss := range [][]series{route, attempt} {
		for _, c := range []struct{ id, state string }{{"oa", "closed"}, {"an", "closed"}, {"down", "open"}} {
			for _, st := range []string{"closed", "open", "half_open", "quarantined", "disabled"} {
				want := 0.0
				if st == c.state {
					want = 1
				}
				if got, _ := sum(ss, "switchyard_deployment_circuit_state", "switchyard_deployment", c.id, "state", st); got != want {
					t.Errorf("replica %d: circuit_state{%s,%s} = %v, want %v", i, c.id, st, got, want)
				}
			}
			expect(t, ss, 0, "switchyard_deployment_attempts_in_flight", "switchyard_deployment", c.id)
		}
		if wait, _ := sum(ss, "switchyard_deployment_retry_after_seconds", "switchyard_deployment", "down"); wait <= 0 || wait > 60 {
			t.Errorf("replica %d: down may be tried in %vs, want its cooldown (0, 60]", i, wait)
		}
		expect(t, ss, 0, "switchyard_deployment_retry_after_seconds", "switchyard_deployment", "oa")
	}
}

// TestStreamsInTinyWritesParse: streams the providers write in 1-7 byte pieces, cut
// anywhere (inside "data:", JSON strings, "\n\n"), reach the SDKs whole in every dialect.
func TestStreamsInTinyWritesParse(t *testing.T) {
	g := startGateway(t, []deployment{
		{ID: "oa", Model: "gpt-4o", ProviderModel: "gpt-4o", Kind: fakeprovider.OpenAI},
		{ID: "an", Model: "claude", ProviderModel: "claude-sonnet-4-5", Kind: fakeprovider.Anthropic},
	}, gatewayOptions{})
	tiny := option.WithHeader(fakeprovider.FaultHeader, "tiny-writes")
	if text, err := g.streamChat(t, tiny, option.WithHeader("x-unified-routing-metadata", "true")); err != nil || text != fullText {
		t.Fatalf("chat: %q %v", text, err)
	}
	rs := g.openai(tiny).Responses.NewStreaming(ctxT(t), responses.ResponseNewParams{Model: "gpt-4o",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var text strings.Builder
	for rs.Next() {
		if ev := rs.Current(); ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
	}
	if err := rs.Err(); err != nil || text.String() != fullText {
		t.Fatalf("responses: %q %v", text.String(), err)
	}
	ms := g.anthropic(anthropicHeader(fakeprovider.FaultHeader, "tiny-writes")).Messages.NewStreaming(ctxT(t),
		anthropic.MessageNewParams{Model: "claude", MaxTokens: 64, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var msg anthropic.Message
	for ms.Next() {
		if err := msg.Accumulate(ms.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := ms.Err(); err != nil || len(msg.Content) != 1 || msg.Content[0].Text != fullText || msg.StopReason != anthropic.StopReasonEndTurn {
		t.Fatalf("anthropic: %+v %q %v", msg.Content, msg.StopReason, err)
	}
	for _, id := range []string{"oa", "an"} {
		for _, r := range g.fakes[id].Requests() {
			if r.Fault == nil || !r.Fault.TinyWrites {
				t.Fatalf("%s answered %s without tiny writes", id, r.Path)
			}
		}
	}
	eventually(t, "in-flight back to 0", func() bool { return g.inFlight("oa", "an") == 0 })
}
