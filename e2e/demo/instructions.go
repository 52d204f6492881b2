package main

import (
	"fmt"
	"io"
	"text/template"
)

// addrs is the running demo, as printed (and handed to tests).
type addrs struct {
	Gateway, EnvoyAdmin      string
	Switchyard               switchyardAddrs
	OpenAI, Azure, Anthropic string
	MasterKey, LogFile       string
}

// instructions is what the demo prints once the gateway routes: the requests to try and the
// admin calls that change routing live (docs/admin-api.md).
var instructions = template.Must(template.New("demo").Parse(`
switchyard demo: the gateway listens on http://{{.Gateway}} (envoysim playing envoy/envoy.yaml,
clusters and route from switchyard's xDS). No client key needed: the demo trusts loopback.

  fake OpenAI        http://{{.OpenAI}}     deployments openai-gpt4o (cheap), openai-gpt4o-mini
  fake Azure OpenAI  http://{{.Azure}}     deployment azure-gpt4o (expensive)
  fake Anthropic     http://{{.Anthropic}}     deployment anthropic-sonnet
  switchyard         ext_proc {{.Switchyard.Extproc}}, xDS {{.Switchyard.XDS}}, admin http://{{.Switchyard.Admin}}
                     operator http://{{.Switchyard.Operator}} (/healthz, /readyz, /metrics;
                     /debug/pprof/ for CPU and heap profiles: -operator-pprof)
  logs               tail -f {{.LogFile}}

Configuration: examples/demo.json. gpt-4o has two deployments routed price-based, so the
cheaper OpenAI one serves; it fails over to Azure, then falls back to gpt-4o-mini.

Try it:

  GW=http://{{.Gateway}}
  # A chat completion (answered by the fake OpenAI)
  curl -s $GW/v1/chat/completions -H 'content-type: application/json' \
    -d '{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}'
  # Streaming
  curl -sN $GW/v1/chat/completions -H 'content-type: application/json' \
    -d '{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}'
  # An Anthropic message (claude-sonnet on the fake Anthropic)
  curl -s $GW/v1/messages -H 'content-type: application/json' -H 'anthropic-version: 2023-06-01' \
    -d '{"model":"claude-sonnet","max_tokens":256,"messages":[{"role":"user","content":"hi"}]}'
  # Failover: the fake OpenAI answers 500, the Azure deployment of gpt-4o serves
  curl -s $GW/v1/chat/completions -H 'content-type: application/json' -H 'x-fake-fault: server=openai; status=500' \
    -d '{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}'
  # Fallback: both gpt-4o deployments fail, the fallback chain serves gpt-4o-mini
  curl -s $GW/v1/chat/completions -H 'content-type: application/json' -H 'x-fake-fault: model=gpt-4o; status=500' \
    -d '{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}'
  # How the request was routed: the unified_routing object in the answer
  curl -s $GW/v1/chat/completions -H 'content-type: application/json' -H 'x-unified-routing-metadata: true' \
    -H 'x-fake-fault: server=openai; status=500' -d '{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}'
  # The public models
  curl -s $GW/v1/models
  # What reached a fake provider (method, path, headers, body of every request)
  curl -s http://{{.OpenAI}}/_fake/requests

With an SDK (turn its retries off: the gateway retries):

  python3 -c 'from openai import OpenAI; c = OpenAI(base_url="http://{{.Gateway}}/v1", api_key="unused", max_retries=0)
  print(c.chat.completions.create(model="gpt-4o", messages=[{"role":"user","content":"hi"}]).choices[0].message.content)'
  # openai-go: openai.NewClient(option.WithBaseURL("http://{{.Gateway}}/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
  # anthropic-sdk-go / anthropic (Python): base URL http://{{.Gateway}}, model "claude-sonnet"

Change routing live (admin API, master key {{.MasterKey}}):

  SY=http://{{.Switchyard.Admin}}; auth=(-H 'Authorization: Bearer {{.MasterKey}}')
  curl -s "${auth[@]}" $SY/v1/models/gpt-4o/deployments                          # circuit state per deployment
  curl -s "${auth[@]}" -X POST $SY/admin/deployments/openai-gpt4o/disable        # kill switch: Azure serves gpt-4o
  curl -s "${auth[@]}" -X POST $SY/admin/deployments/openai-gpt4o/enable
  curl -s "${auth[@]}" -X PUT $SY/admin/router-settings -d '{"routingStrategy":"simple-shuffle"}'   # both deployments share gpt-4o
  curl -s "${auth[@]}" -X POST $SY/admin/fallback-chains/gpt-4o/general/disable  # no fallback to gpt-4o-mini
  curl -s "${auth[@]}" $SY/admin/deployments                                    # keys are never shown

Ctrl-C stops everything.
`))

func printInstructions(w io.Writer, a addrs) error {
	if err := instructions.Execute(w, a); err != nil {
		return fmt.Errorf("printing the instructions: %w", err)
	}
	return nil
}
