// Package dialect owns what switchyard knows of the client-side APIs it serves: which
// request a method and path name (OpenAI Chat Completions, OpenAI Responses, OpenAI
// embeddings, Anthropic Messages, and the models listing), the routing facts read from a
// request body (model, stream, operation and the capability needs of behaviour §9.2), and the
// exact shapes of what switchyard itself answers in each dialect: error bodies (behaviour §13.1)
// and models listings.
//
// Bodies are read with gjson and never decoded as a whole. The package knows nothing of
// Envoy or gRPC: the route role turns its results into ext_proc messages.
package dialect
