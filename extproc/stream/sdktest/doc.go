// Package sdktest proves, with the official openai-go and anthropic-sdk-go streaming
// clients, that the events package stream writes are what those SDKs expect: the error event
// after commit raises an error carrying the request id, and the unified_routing final events
// are read to the end. It holds only tests; it lives apart so that stream's own tests and
// fuzz targets build without the SDKs (whose size slows coverage-guided fuzzing a
// hundredfold).
package sdktest
