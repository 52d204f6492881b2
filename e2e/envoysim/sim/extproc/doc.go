// Package extproc is envoysim's ext_proc HTTP filter: the client side of
// envoy.service.ext_proc.v3.ExternalProcessor as Envoy's
// envoy.filters.http.ext_proc filter implements it, usable both as a downstream
// (HTTP connection manager) filter and as an upstream (cluster http_filters) filter.
//
// The state machine imitates, function by function, Envoy's
// source/extensions/filters/http/ext_proc/ext_proc.cc (Filter),
// processor_state.cc (ProcessorState: one per direction) and mutation_utils.cc /
// source/extensions/filters/common/mutation_rules/mutation_rules.cc (header
// mutation checks). Comments name the Envoy function each piece imitates. The Envoy
// release modelled is 1.37/1.38 (FULL_DUPLEX_STREAMED, status_on_error, stream close
// optimisation, DEFAULT header modes in mode_override).
//
// No code is copied from Envoy; behaviour is re-implemented from reading it.
package extproc
