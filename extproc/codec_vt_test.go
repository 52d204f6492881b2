//go:build vtprotobuf

package extproc

import (
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// Built as make builds (the vtprotobuf tag), every answer to Envoy takes the generated
// marshalling: a go-control-plane upgrade that dropped it, or a build without the tag in
// the Makefile, fails here instead of silently costing the reflection path.
func TestAnswersUseTheGeneratedMarshalling(t *testing.T) {
	var resp any = &extprocv3.ProcessingResponse{}
	if _, ok := resp.(vtMessage); !ok {
		t.Fatal("*ProcessingResponse has no vtprotobuf marshalling")
	}
}
