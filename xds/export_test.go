package xds

// The in-package test helpers the external tests (package xds_test) use: those build a
// whole replica (internal/replica), which imports this package.
var (
	StartEnvoy = startEnvoy
	WaitFor    = waitFor
	WriteCA    = writeCA
)
