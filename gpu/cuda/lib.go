package cuda

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unsafe"
)

// ErrLibraryNotFound means no candidate of a library could be opened: missing, or not a shared library for
// this machine. The error lists each candidate with the dynamic loader's reason.
var ErrLibraryNotFound = errors.New("no loadable library")

// ErrSymbolNotFound means a library was opened but lacks a function this package needs: it is not the
// expected library, or too old.
var ErrSymbolNotFound = errors.New("symbol not found")

// library is an opened shared object.
type library struct {
	path   string
	handle uintptr
}

// openFirst opens the first loadable candidate. A candidate with a slash is a file path; a bare name is
// resolved by the dynamic loader (LD_LIBRARY_PATH, the ld.so cache, the default directories). The error
// lists every attempt and wraps ErrLibraryNotFound.
func openFirst(what string, candidates []string) (library, error) {
	var reasons []string
	absent := 0
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if strings.ContainsRune(c, '/') {
			if _, err := os.Stat(c); err != nil {
				if errors.Is(err, fs.ErrNotExist) && len(reasons) > 0 {
					absent++
				} else {
					reasons = append(reasons, fmt.Sprintf("%s: %v", c, errors.Unwrap(err)))
				}
				continue
			}
		}
		h, err := dlopen(c)
		if err != nil {
			// "No such file" is said once, for the first candidate; other reasons (wrong architecture,
			// not an ELF file, a missing dependency) each matter.
			if len(reasons) > 0 && strings.Contains(err.Error(), "No such file") {
				absent++
			} else {
				reasons = append(reasons, err.Error())
			}
			continue
		}
		return library{path: c, handle: h}, nil
	}
	if absent > 0 {
		reasons = append(reasons, fmt.Sprintf("absent from %d other places searched", absent))
	}
	return library{}, fmt.Errorf("load %s: %w (%s)", what, ErrLibraryNotFound, strings.Join(reasons, "; "))
}

// expandDirs returns name itself (for the loader's own search) followed by name in each directory.
func expandDirs(names []string, dirs []string) []string {
	out := append([]string(nil), names...)
	for _, d := range dirs {
		for _, n := range names {
			out = append(out, filepath.Join(d, n))
		}
	}
	return out
}

// binder resolves symbols into typed Go functions and remembers the first failure, so a constructor can
// bind a whole table and check once. It never panics on a missing symbol (purego.RegisterLibFunc would).
type binder struct {
	lib library
	err error
}

// bind resolves name into fptr (a pointer to a func variable).
func (b *binder) bind(fptr any, name string) {
	if b.err != nil {
		return
	}
	sym, err := dlsym(b.lib.handle, name)
	if err != nil || sym == 0 {
		b.err = fmt.Errorf("%s: %s: %w", b.lib.path, name, ErrSymbolNotFound)
		return
	}
	register(fptr, sym)
}

// optional resolves name into fptr if present and reports whether it was.
func (b *binder) optional(fptr any, name string) bool {
	sym, err := dlsym(b.lib.handle, name)
	if err != nil || sym == 0 {
		return false
	}
	register(fptr, sym)
	return true
}

// goString copies a NUL-terminated C string; nil gives "".
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// cString returns s as a NUL-terminated byte slice.
func cString(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}
