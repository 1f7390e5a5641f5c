//go:build unix

package main

import (
	"os"
	"syscall"
)

// fileOwner is fi's owner and group, when the platform says.
func fileOwner(fi os.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
