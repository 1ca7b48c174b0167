package batchinput

import (
	"archive/zip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"strings"

	"filigrane/internal/problem"
)

// Limits of a batch zip (spec 8).
const (
	// MaxZip is the largest zip a request may send.
	MaxZip = 55_000_000
	// MaxUnpacked bounds the sum of the members' sizes.
	MaxUnpacked = 512_000_000
	// MaxRatio bounds one member's uncompressed size over its compressed size.
	MaxRatio = 100
	// MaxDirectory bounds the central directory, checked from the end record before it is parsed: 100
	// members and the system entries beside them need a few kilobytes; a megabyte of directory is a
	// million-entry bomb in the making.
	MaxDirectory = 1 << 20
	// MaxEntries bounds the entries of the directory.
	MaxEntries = 10_000
)

// Member is a checked member of the zip, in manifest order.
type Member struct {
	Name string
	Size int64
	file *zip.File
}

// Members is a checked zip: each member of the manifest, found once in the zip, with its size.
type Members struct {
	List []Member
	// Unpacked is the sum of the members' sizes.
	Unpacked int64
}

// system names whose entries are ignored (and must not be listed): macOS resource forks and folder
// settings of Windows and macOS.
var systemNames = map[string]bool{".ds_store": true, "thumbs.db": true, "desktop.ini": true}

// ignoredEntry reports whether name is a folder or a system entry, ignored in the zip.
func ignoredEntry(name string) bool {
	if strings.HasSuffix(name, "/") {
		return true
	}
	for _, part := range strings.Split(name, "/") {
		if strings.EqualFold(part, "__MACOSX") {
			return true
		}
	}
	return systemNames[strings.ToLower(path.Base(name))]
}

// checkMemberPath refuses names that are not plain relative paths: absolute, with a drive letter, with
// backslashes, `..` or empty parts, or not UTF-8.
func checkMemberPath(name string) error {
	switch {
	case name == "":
		return errors.New("an empty member name")
	case strings.ContainsRune(name, '\\'):
		return errors.New("backslashes are not allowed in member paths")
	case strings.HasPrefix(name, "/"):
		return errors.New("absolute paths are not allowed")
	case len(name) >= 2 && name[1] == ':':
		return errors.New("drive letters are not allowed")
	case strings.ContainsRune(name, 0):
		return errors.New("NUL in a member path")
	}
	for _, part := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
		switch part {
		case "..":
			return errors.New("`..` is not allowed in member paths")
		case "", ".":
			return errors.New("empty or `.` path parts are not allowed")
		}
	}
	return nil
}

// CheckZip reads the central directory of the zip in r (size bytes) and checks every rule of spec 8
// against the manifest's items, before anything is unpacked: the directory's size and entry count from
// the end record, then every entry's path, encryption and method, then that the manifest and the zip list
// the same files once each (folders and system entries ignored), then each member's size against its
// media limit (413), its ratio, and the unpacked total. On success it fills each item's Size.
func CheckZip(r io.ReaderAt, size int64, items []Item) (*Members, *Error) {
	if size <= 0 {
		return nil, fail(problem.InvalidZip, "the archive is empty")
	}
	if size > MaxZip {
		return nil, fail(problem.TooLarge, "the archive exceeds %d bytes", MaxZip)
	}
	if aerr := checkDirectoryBounds(r, size); aerr != nil {
		return nil, aerr
	}
	zr, err := zip.NewReader(r, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return nil, fail(problem.InvalidZip, "the archive is not a zip we can read")
	}
	if zr == nil {
		return nil, fail(problem.InvalidZip, "the archive is not a zip we can read")
	}
	byName := make(map[string]*zip.File, len(zr.File))
	for _, f := range zr.File {
		name := f.Name
		if !utf8Valid(name) {
			return nil, fail(problem.InvalidZip, "a member name is not UTF-8")
		}
		if err := checkMemberPath(name); err != nil {
			return nil, fail(problem.InvalidZip, "member %q: %s", truncateName(name), err)
		}
		if f.Flags&0x41 != 0 { // bit 0: encrypted; bit 6: strong encryption
			return nil, fail(problem.InvalidZip, "member %q is encrypted; encrypted members are refused", truncateName(name))
		}
		if ignoredEntry(name) {
			continue
		}
		if f.Method != zip.Store && f.Method != zip.Deflate {
			return nil, fail(problem.InvalidZip, "member %q uses compression method %d; only stored and deflate are accepted", truncateName(name), f.Method)
		}
		if _, dup := byName[name]; dup {
			return nil, fail(problem.InvalidZip, "the zip holds %q twice", truncateName(name))
		}
		byName[name] = f
	}
	listed := make(map[string]bool, len(items))
	for i := range items {
		listed[items[i].Filename] = true
		if _, ok := byName[items[i].Filename]; !ok {
			return nil, fail(problem.InvalidZip, "items[%d].filename %q is not a member of the zip", i, truncateName(items[i].Filename))
		}
	}
	for name := range byName {
		if !listed[name] {
			return nil, fail(problem.InvalidZip, "the zip holds %q, which the manifest does not list; list every file once", truncateName(name))
		}
	}
	m := &Members{List: make([]Member, len(items))}
	for i := range items {
		f := byName[items[i].Filename]
		un, comp := f.UncompressedSize64, f.CompressedSize64
		if un == 0 {
			return nil, fail(problem.InvalidZip, "member %q is empty", truncateName(f.Name))
		}
		if limit := items[i].Kind.Limits.BatchMember; un > uint64(limit) {
			return nil, fail(problem.FileTooLarge, "member %q unpacks to %d bytes; a batch %s holds at most %d bytes",
				truncateName(f.Name), un, items[i].Kind.Noun, limit)
		}
		if comp > uint64(size) {
			return nil, fail(problem.InvalidZip, "member %q claims more compressed bytes than the archive holds", truncateName(f.Name))
		}
		if comp == 0 || un/comp > MaxRatio || (un/comp == MaxRatio && un%comp != 0) {
			return nil, fail(problem.ZipTooLarge, "member %q is compressed more than %d:1", truncateName(f.Name), MaxRatio)
		}
		m.Unpacked += int64(un)
		if m.Unpacked > MaxUnpacked {
			return nil, fail(problem.ZipTooLarge, "the zip unpacks to more than %d bytes", MaxUnpacked)
		}
		items[i].Size = int64(un)
		m.List[i] = Member{Name: f.Name, Size: int64(un), file: f}
	}
	return m, nil
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

const (
	sigEnd       = 0x06054b50
	sigEnd64     = 0x06064b50
	sigLocator64 = 0x07064b50
	endLen       = 22
	locatorLen   = 20
	end64Len     = 56
)

// checkDirectoryBounds reads the end-of-central-directory record (and its zip64 form) and refuses a
// directory above MaxDirectory or MaxEntries before archive/zip parses and allocates for it.
func checkDirectoryBounds(r io.ReaderAt, size int64) *Error {
	tail := int64(endLen + 65535) // the end record and the longest comment
	if tail > size {
		tail = size
	}
	buf := make([]byte, tail)
	if _, err := r.ReadAt(buf, size-tail); err != nil && !errors.Is(err, io.EOF) {
		return fail(problem.InvalidZip, "the archive could not be read")
	}
	at := -1
	for i := len(buf) - endLen; i >= 0; i-- {
		if binary.LittleEndian.Uint32(buf[i:]) == sigEnd {
			at = i
			break
		}
	}
	if at < 0 {
		return fail(problem.InvalidZip, "the archive is not a zip (no end of central directory)")
	}
	end := buf[at:]
	entries := uint64(binary.LittleEndian.Uint16(end[10:]))
	dirSize := uint64(binary.LittleEndian.Uint32(end[12:]))
	if entries == 0xffff || dirSize == 0xffffffff {
		// zip64: the locator sits just before the end record and points at the zip64 end record.
		locAt := size - tail + int64(at) - locatorLen
		var loc [locatorLen]byte
		if locAt < 0 {
			return fail(problem.InvalidZip, "the archive's zip64 directory is missing")
		}
		if _, err := r.ReadAt(loc[:], locAt); err != nil || binary.LittleEndian.Uint32(loc[:]) != sigLocator64 {
			return fail(problem.InvalidZip, "the archive's zip64 directory is missing")
		}
		off := binary.LittleEndian.Uint64(loc[8:])
		var e64 [end64Len]byte
		if off > uint64(size-end64Len) {
			return fail(problem.InvalidZip, "the archive's zip64 directory is out of bounds")
		}
		if _, err := r.ReadAt(e64[:], int64(off)); err != nil || binary.LittleEndian.Uint32(e64[:]) != sigEnd64 {
			return fail(problem.InvalidZip, "the archive's zip64 directory is damaged")
		}
		entries = binary.LittleEndian.Uint64(e64[32:])
		dirSize = binary.LittleEndian.Uint64(e64[40:])
	}
	if dirSize > MaxDirectory || entries > MaxEntries {
		return fail(problem.ZipTooLarge, "the zip's directory holds %d entries in %d bytes; at most %d entries in %d bytes are read",
			entries, dirSize, MaxEntries, MaxDirectory)
	}
	return nil
}

// ErrMemberSize: a member produced other bytes than its directory entry declares.
var ErrMemberSize = errors.New("zip member size differs from its directory entry")

// Open returns a reader of member i that produces exactly its declared size and fails otherwise (the
// declared sizes are what the limits were checked against); the CRC is checked at the end.
func (m *Members) Open(i int) (io.ReadCloser, error) {
	mb := m.List[i]
	rc, err := mb.file.Open()
	if err != nil {
		return nil, fmt.Errorf("open zip member %q: %w", mb.Name, err)
	}
	return &countedMember{rc: rc, left: mb.Size, name: mb.Name, crc: crc32.NewIEEE(), want: mb.file.CRC32}, nil
}

type countedMember struct {
	rc   io.ReadCloser
	left int64
	name string
	crc  interface {
		io.Writer
		Sum32() uint32
	}
	want uint32
}

func (c *countedMember) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// One more byte would be past the declared size: the member lied.
		var one [1]byte
		if n, _ := c.rc.Read(one[:]); n > 0 {
			return 0, fmt.Errorf("zip member %q: %w", c.name, ErrMemberSize)
		}
		if c.crc.Sum32() != c.want {
			return 0, fmt.Errorf("zip member %q: checksum mismatch: %w", c.name, zip.ErrChecksum)
		}
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.rc.Read(p)
	c.left -= int64(n)
	c.crc.Write(p[:n])
	if errors.Is(err, io.EOF) {
		if c.left > 0 {
			return n, fmt.Errorf("zip member %q: %w", c.name, ErrMemberSize)
		}
		err = nil
	}
	return n, err
}

func (c *countedMember) Close() error { return c.rc.Close() }
