// Package fakeprovider runs fake LLM provider HTTP servers for end-to-end tests of the
// gateway. Each fake speaks one provider's real wire format — OpenAI (Chat Completions,
// Responses, Embeddings), Azure OpenAI (deployment-scoped and v1 routes) or Anthropic
// (Messages) — in JSON and SSE, with the auth checks, error bodies, in-band stream errors,
// rate-limit headers and usage fields described in docs/wire-formats.md
// (cited below as "wire-formats §N").
//
// Responses are deterministic: the configured text is split into a fixed number of chunks,
// each chunk counts as one completion token, and every usage field is derived from the
// same numbers, so tests can assert token metrics exactly.
//
// Faults are scripted per request either from Go ([Server.Script]) or from the
// [FaultHeader] request header, whose syntax is parsed by [ParseFaultHeader]. A fault can
// answer with a provider-shaped (or raw) error, add Retry-After headers, stall before the
// headers or mid-stream with optional keepalive comments, delay the first body byte, end
// the stream with an in-band error, drop the terminal marker, cut the stream cleanly,
// filter the output, or reset the TCP connection.
//
// Every request is recorded ([Server.Requests]) so tests can assert what the gateway sent.
// A [Server] is an [http.Handler]; serve it with httptest.NewServer, httptest.NewTLSServer
// or any listener. It is safe for concurrent use.
package fakeprovider
