//go:build !nogpu

package cuda

import "github.com/ebitengine/purego"

// LoaderBuilt is true: this build can load libraries at run time (false with the nogpu tag).
const LoaderBuilt = true

// The only three calls into the dynamic loader; dl_nogpu.go replaces them in static builds.

func dlopen(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
}

func dlsym(handle uintptr, name string) (uintptr, error) { return purego.Dlsym(handle, name) }

func register(fptr any, sym uintptr) { purego.RegisterFunc(fptr, sym) }
