// Package sdktest proves, with the official openai-go and anthropic-sdk-go clients, that
// what package dialect renders is what those SDKs parse: typed API errors with every field,
// and models listings. It holds only tests; it lives apart so that dialect's own tests and
// fuzz targets build without the SDKs.
package sdktest
