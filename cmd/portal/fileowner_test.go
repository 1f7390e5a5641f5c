package main

import (
	"os"
	"testing"
)

// TestKubeletSecretLayout: the one group-readable secret file the portal
// accepts is the kubelet's secret volume for a non-root pod with fsGroup
// (root's, 0440, the process in the file's group and not root); every other
// group- or world-accessible mode is refused as before.
func TestKubeletSecretLayout(t *testing.T) {
	const fsGroup, user = 65532, 65532
	for _, tc := range []struct {
		name     string
		perm     os.FileMode
		uid, gid int
		euid     int
		groups   []int
		accepted bool
	}{
		{"kubelet secret volume with fsGroup", 0o440, 0, fsGroup, user, []int{fsGroup}, true},
		{"group read only (defaultMode 0040)", 0o040, 0, fsGroup, user, []int{fsGroup}, true},
		{"group may write", 0o460, 0, fsGroup, user, []int{fsGroup}, false},
		{"others may read", 0o444, 0, fsGroup, user, []int{fsGroup}, false},
		{"owner may write", 0o640, 0, fsGroup, user, []int{fsGroup}, false},
		{"group may execute", 0o450, 0, fsGroup, user, []int{fsGroup}, false},
		{"not in the file's group", 0o440, 0, 1234, user, []int{fsGroup}, false},
		{"not root's file", 0o440, 1000, fsGroup, user, []int{fsGroup}, false},
		{"the portal's own file", 0o440, user, fsGroup, user, []int{fsGroup}, false},
		{"the portal runs as root", 0o440, 0, 0, 0, []int{0}, false},
	} {
		if got := kubeletSecretLayout(tc.perm, tc.uid, tc.gid, tc.euid, tc.groups); got != tc.accepted {
			t.Errorf("%s (mode %04o, owner %d:%d, euid %d, groups %v): accepted = %v, want %v",
				tc.name, tc.perm, tc.uid, tc.gid, tc.euid, tc.groups, got, tc.accepted)
		}
	}
}
