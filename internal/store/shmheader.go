package store

import (
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// shmHeader reads the WAL-index header of a SQLite database in WAL mode
// from its -shm file, mapped shared, as SQLite's own connections read it:
// about a hundred nanoseconds, where PRAGMA data_version costs a query, a
// read transaction and a file lock (issue 15: a fifth of a cached page's
// time).
//
// The layout is SQLite's, documented at
// https://sqlite.org/walformat.html#the_wal_index_file_format: the file
// begins with two copies of a 48-byte header, then the checkpoint
// information. A header holds iVersion (3007000), an unused word, iChange
// ("incremented with each transaction"), isInit, the page size, mxFrame
// (the last valid frame), the database size, the last frame's checksum,
// the WAL's salts (changed by every WAL restart) and the header's own
// checksum. A writer commits by writing copy 2, then a memory barrier,
// then copy 1 (wal.c, walIndexWriteHdr); a reader that finds both copies
// equal has a complete header ("if the two copies differ, a writer is
// partway through an update": read again or fall back). So equal headers
// mean no commit in between, and every commit changes iChange.
//
// When the header cannot be read consistently (being written, not
// initialized, another version of the format, the file replaced), read
// reports false and the caller asks SQLite instead (PRAGMA data_version).
type shmHeader struct {
	f   *os.File
	mem []byte
	ino uint64
}

const (
	walIndexHeaderSize = 48
	walIndexVersion    = 3007000
)

// openShmHeader maps the first page of the -shm file at path, or returns
// nil when it cannot (no such file: not WAL mode).
func openShmHeader(path string) *shmHeader {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Size < 2*walIndexHeaderSize {
		f.Close()
		return nil
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, os.Getpagesize(), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil
	}
	return &shmHeader{f: f, mem: mem, ino: st.Ino}
}

// read returns the header when both copies agree and it is initialized,
// in the known format, and the file is still the database's -shm file.
func (h *shmHeader) read() ([walIndexHeaderSize]byte, bool) {
	var a, b [walIndexHeaderSize]byte
	if !h.current() {
		return a, false // deleted or replaced: this mapping is no longer SQLite's
	}
	load(&a, h.mem[:walIndexHeaderSize])
	load(&b, h.mem[walIndexHeaderSize:2*walIndexHeaderSize])
	// iVersion is the first word, isInit the 13th byte (host byte order,
	// as SQLite writes it).
	version := *(*uint32)(unsafe.Pointer(&a[0]))
	if a != b || a[12] != 1 || version != walIndexVersion {
		return a, false
	}
	return a, true
}

// current reports whether the mapped file is still the database's -shm
// file (not deleted, not replaced by another).
func (h *shmHeader) current() bool {
	var st syscall.Stat_t
	return syscall.Fstat(int(h.f.Fd()), &st) == nil && st.Nlink != 0 && st.Ino == h.ino
}

// load copies a header word by word with atomic loads, so that neither
// the compiler nor the processor reorders them past the copy's reading.
func load(dst *[walIndexHeaderSize]byte, src []byte) {
	for i := 0; i < walIndexHeaderSize; i += 4 {
		w := atomic.LoadUint32((*uint32)(unsafe.Pointer(&src[i])))
		*(*uint32)(unsafe.Pointer(&dst[i])) = w
	}
}

func (h *shmHeader) close() {
	syscall.Munmap(h.mem)
	h.f.Close()
}
