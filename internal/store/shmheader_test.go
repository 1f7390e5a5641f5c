package store

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// TestShmHeaderReadsOnlyACompleteHeader: the WAL-index header is trusted
// only when its two copies agree (a writer is not partway through), it is
// initialized and in the known format, and the file is still there; any
// other state sends the caller to SQLite.
func TestShmHeaderReadsOnlyACompleteHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db-shm")
	hdr := func(change uint32) []byte {
		b := make([]byte, walIndexHeaderSize)
		binary.NativeEndian.PutUint32(b[0:], walIndexVersion)
		binary.NativeEndian.PutUint32(b[8:], change)
		b[12] = 1 // isInit
		return b
	}
	write := func(first, second []byte) {
		t.Helper()
		b := make([]byte, 32768)
		copy(b, first)
		copy(b[walIndexHeaderSize:], second)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(hdr(7), hdr(7))
	h := openShmHeader(path)
	if h == nil {
		t.Fatal("the -shm file was not mapped")
	}
	defer h.close()
	rewrite := func(first, second []byte) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(append(append([]byte(nil), first...), second...), 0); err != nil {
			t.Fatal(err)
		}
	}
	got7, ok := h.read()
	if !ok {
		t.Fatal("a complete header was not read")
	}
	rewrite(hdr(8), hdr(8))
	if got8, ok := h.read(); !ok || got8 == got7 {
		t.Errorf("after a commit (iChange 7 -> 8): read %v, changed %v", ok, got8 != got7)
	}
	uninit := hdr(9)
	uninit[12] = 0
	otherFormat := hdr(9)
	binary.NativeEndian.PutUint32(otherFormat[0:], walIndexVersion+1)
	for name, c := range map[string][2][]byte{
		"copies differ (a writer partway through)": {hdr(9), hdr(8)},
		"not initialized":                          {uninit, uninit},
		"another format version":                   {otherFormat, otherFormat},
	} {
		rewrite(c[0], c[1])
		if _, ok := h.read(); ok {
			t.Errorf("%s: the header was trusted", name)
		}
	}
	rewrite(hdr(9), hdr(9))
	if _, ok := h.read(); !ok {
		t.Fatal("a complete header was not read")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.read(); ok {
		t.Error("the header of a deleted -shm file was trusted")
	}
}
