//go:build nogpu

package cuda

import "errors"

// LoaderBuilt is false: this build cannot load libraries (the nogpu tag).
const LoaderBuilt = false

// Built with the nogpu tag: no dynamic loader, so a CGO_ENABLED=0 binary stays statically linked and every
// Load fails with this reason.
var errNoGPUBuild = errors.New("this binary was built with the nogpu tag and cannot load libraries")

func dlopen(string) (uintptr, error) { return 0, errNoGPUBuild }

func dlsym(uintptr, string) (uintptr, error) { return 0, errNoGPUBuild }

func register(any, uintptr) { panic("cuda: register without a loaded library") }
