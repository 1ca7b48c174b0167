//go:build !cuda

package gpu

// codecBuilt is false: this binary was built without the cuda tag.
const codecBuilt = false
