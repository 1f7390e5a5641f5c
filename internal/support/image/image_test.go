package image_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/hyperpod-governance/portal/internal/support/image"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

// What the test passes to the image tool, and so what it expects back.
const (
	testVersion  = "v0.0.0-imagetest"
	testRevision = "0123456789abcdef0123456789abcdef01234567"
	hostCACerts  = "/etc/ssl/certs/ca-certificates.crt"
)

var testCreated = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestImage builds the portal binary and the image exactly as make image
// does (through the hack/image command, twice), reads the image back from
// the OCI layout and the docker-archive with go-containerregistry, checks its
// config and files, and runs its entrypoint from the extracted layers.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the portal binary and a 28 MB image; run without -short (make test does)")
	}
	if _, err := os.Stat(hostCACerts); err != nil {
		t.Fatalf("%s: %v (Debian's ca-certificates package; make deps installs it)", hostCACerts, err)
	}
	root := testenv.ModuleRoot()
	dir := t.TempDir()
	portal := testenv.BinPath("portal-image", dir)
	testenv.MustGoBuild(t, portal, "./cmd/portal", "-s -w -X main.version="+testVersion)
	tool := testenv.BinPath("image-tool", dir)
	testenv.MustGoBuild(t, tool, "./hack/image", "-s -w")

	build := func(out string) string {
		cmd := exec.Command(tool, "--binary", portal, "--ca-certs", hostCACerts,
			"--version", testVersion, "--revision", testRevision,
			"--created", strconv.FormatInt(testCreated.Unix(), 10),
			"--oci-layout", filepath.Join(out, "layout"), "--tar", filepath.Join(out, "image.tar"))
		cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=") // --created only
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("hack/image: %v\n%s", err, b)
		}
		return string(b)
	}
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	outA := build(a)
	build(b)
	t.Logf("%s", outA)

	t.Run("reproducible", func(t *testing.T) {
		// Same inputs, two runs: byte-identical layout index, manifest
		// digest, and docker-archive.
		for _, f := range []string{"layout/index.json", "image.tar"} {
			ha, hb := fileSHA256(t, filepath.Join(a, f)), fileSHA256(t, filepath.Join(b, f))
			if ha != hb {
				t.Errorf("%s differs between two builds of the same inputs: %s vs %s", f, ha, hb)
			}
		}
	})

	idx, err := layout.ImageIndexFromPath(filepath.Join(a, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("the layout holds %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != runtime.GOARCH {
		t.Errorf("layout descriptor platform = %+v, want linux/%s", desc.Platform, runtime.GOARCH)
	}
	if got := desc.Annotations["org.opencontainers.image.ref.name"]; got != testVersion {
		t.Errorf("layout ref name = %q, want %q", got, testVersion)
	}
	if !strings.Contains(outA, desc.Digest.String()) {
		t.Errorf("hack/image printed %q, not the layout's digest %s", outA, desc.Digest)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("config", func(t *testing.T) {
		for _, e := range checkConfig(cf, m, testCreated) {
			t.Error(e)
		}
	})

	rootfs := filepath.Join(dir, "rootfs")
	files := extract(t, img, rootfs)

	t.Run("files", func(t *testing.T) {
		certs, err := os.ReadFile(hostCACerts)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range checkFiles(files, testCreated, certs) {
			t.Error(e)
		}
	})

	t.Run("static", func(t *testing.T) {
		if err := checkStatic(filepath.Join(rootfs, "portal")); err != nil {
			t.Error(err)
		}
	})

	t.Run("docker-archive", func(t *testing.T) {
		tb, err := tarball.ImageFromPath(filepath.Join(a, "image.tar"), nil)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := img.ConfigName()
		if got, _ := tb.ConfigName(); got != want {
			t.Errorf("docker-archive config %s, OCI layout config %s", got, want)
		}
		tm, err := tb.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(tm.Layers) != len(m.Layers) {
			t.Fatalf("docker-archive has %d layers, OCI layout %d", len(tm.Layers), len(m.Layers))
		}
		for i := range tm.Layers {
			if tm.Layers[i].Digest != m.Layers[i].Digest {
				t.Errorf("layer %d: docker-archive %s, OCI layout %s", i, tm.Layers[i].Digest, m.Layers[i].Digest)
			}
		}
		mf, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(filepath.Join(a, "image.tar")) })
		if err != nil {
			t.Fatal(err)
		}
		if len(mf) != 1 || !slices.Equal(mf[0].RepoTags, []string{"hyperpod-portal:" + testVersion}) {
			t.Errorf("docker-archive manifest.json = %+v, want one image tagged hyperpod-portal:%s", mf, testVersion)
		}
	})

	t.Run("dockerfile agrees", func(t *testing.T) {
		df, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range checkDockerfile(string(df), cf.Config) {
			t.Error(e)
		}
	})

	t.Run("entrypoint runs", func(t *testing.T) {
		bin := filepath.Join(rootfs, cf.Config.Entrypoint[0])
		out, err := exec.Command(bin, "version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "portal "+testVersion+" ") {
			t.Errorf("%s version: %v: %q, want it to start with %q", bin, err, out, "portal "+testVersion+" ")
		}
		out, err = exec.Command(bin, "help").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "usage: portal") {
			t.Errorf("%s help: %v: %q", bin, err, out)
		}
		// The image's command (serve) in dev mode on a free loopback port,
		// with a temporary SQLite file.
		work := t.TempDir()
		cmd := exec.Command(bin, append(slices.Clone(cf.Config.Cmd), "--dev", "--listen", "127.0.0.1:0",
			"--db", filepath.Join(work, "portal.db"), "--session-key-file", filepath.Join(work, "session.key"))...)
		cmd.Env = cf.Config.Env
		cmd.Dir = work
		serve(t, cmd)
	})

	t.Run("entrypoint runs chrooted as the image user", func(t *testing.T) {
		// Closest to a container runtime without one: the process sees only
		// the image's files, runs as its User from its WorkingDir with its
		// Env, and so keeps its database and dev session key in /data.
		if os.Geteuid() != 0 {
			t.Skip("chroot needs root; the unchrooted run above still ran the entrypoint")
		}
		uid, gid, err := parseUser(cf.Config.User)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(cf.Config.Entrypoint[0], append(slices.Clone(cf.Config.Cmd), "--dev", "--listen", "127.0.0.1:0")...)
		cmd.Env = cf.Config.Env
		cmd.Dir = cf.Config.WorkingDir
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: rootfs, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		serve(t, cmd)
		for _, f := range []string{"data/portal.db", "data/session.key"} {
			fi, err := os.Stat(filepath.Join(rootfs, f))
			if err != nil {
				t.Errorf("/%s: %v", f, err)
				continue
			}
			if st := fi.Sys().(*syscall.Stat_t); st.Uid != image.UID {
				t.Errorf("/%s is owned by %d, want %d", f, st.Uid, image.UID)
			}
		}
	})

	t.Run("checks catch broken images", func(t *testing.T) {
		// Each rule the checks above enforce, broken once: the check must
		// say so.
		cfgCases := map[string]func(*v1.ConfigFile, *v1.Manifest){
			"user":       func(c *v1.ConfigFile, _ *v1.Manifest) { c.Config.User = "0:0" },
			"root user":  func(c *v1.ConfigFile, _ *v1.Manifest) { c.Config.User = "root" },
			"no user":    func(c *v1.ConfigFile, _ *v1.Manifest) { c.Config.User = "" },
			"entrypoint": func(c *v1.ConfigFile, _ *v1.Manifest) { c.Config.Entrypoint = []string{"/bin/sh", "-c"} },
			"cmd":        func(c *v1.ConfigFile, _ *v1.Manifest) { c.Config.Cmd = nil },
			"port":       func(c *v1.ConfigFile, _ *v1.Manifest) { c.Config.ExposedPorts = nil },
			"env":        func(c *v1.ConfigFile, _ *v1.Manifest) { c.Config.Env = c.Config.Env[:1] },
			"label":      func(c *v1.ConfigFile, _ *v1.Manifest) { delete(c.Config.Labels, image.LabelRevision) },
			"created":    func(c *v1.ConfigFile, _ *v1.Manifest) { c.Created = v1.Time{Time: time.Now()} },
			"platform":   func(c *v1.ConfigFile, _ *v1.Manifest) { c.Architecture = "s390x" },
			"media type": func(_ *v1.ConfigFile, m *v1.Manifest) { m.MediaType = types.DockerManifestSchema2 },
			"layer type": func(_ *v1.ConfigFile, m *v1.Manifest) { m.Layers[0].MediaType = types.DockerLayer },
		}
		for name, breakIt := range cfgCases {
			c, mm := cf.DeepCopy(), m.DeepCopy()
			breakIt(c, mm)
			if len(checkConfig(c, mm, testCreated)) == 0 {
				t.Errorf("config with a broken %s passed the checks", name)
			}
		}
		certs, _ := os.ReadFile(hostCACerts)
		fileCases := map[string]func(map[string]entry){
			"/portal writable":   func(f map[string]entry) { e := f["portal"]; e.Mode = 0o777; f["portal"] = e },
			"/portal not root's": func(f map[string]entry) { e := f["portal"]; e.Uid = image.UID; f["portal"] = e },
			"/data root's":       func(f map[string]entry) { e := f["data/"]; e.Uid, e.Gid, e.Mode = 0, 0, 0o755; f["data/"] = e },
			"/tmp not writable":  func(f map[string]entry) { e := f["tmp/"]; e.Mode = 0o755; f["tmp/"] = e },
			"no nonroot user": func(f map[string]entry) {
				e := f["etc/passwd"]
				e.body = []byte("root:x:0:0:root:/root:/sbin/nologin\n")
				f["etc/passwd"] = e
			},
			"no nonroot group": func(f map[string]entry) { e := f["etc/group"]; e.body = []byte("root:x:0:\n"); f["etc/group"] = e },
			"no CA bundle":     func(f map[string]entry) { delete(f, "etc/ssl/certs/ca-certificates.crt") },
			"a shell": func(f map[string]entry) {
				f["bin/sh"] = entry{Header: tar.Header{Name: "bin/sh", Mode: 0o755, ModTime: testCreated}}
			},
			"an mtime": func(f map[string]entry) { e := f["etc/"]; e.ModTime = time.Now(); f["etc/"] = e },
		}
		for name, breakIt := range fileCases {
			f := make(map[string]entry, len(files))
			for k, v := range files {
				f[k] = v
			}
			breakIt(f)
			if len(checkFiles(f, testCreated, certs)) == 0 {
				t.Errorf("files with %s passed the checks", name)
			}
		}
		// A dynamically linked binary: the check and the image builder
		// both refuse it.
		dyn := "/bin/ls"
		if _, err := os.Stat(dyn); err != nil {
			t.Skipf("no %s to try a dynamic binary with", dyn)
		}
		if err := checkStatic(dyn); err == nil {
			t.Errorf("checkStatic(%s) passed a dynamically linked binary", dyn)
		}
		if _, err := image.Build(image.Options{Binary: dyn, CACerts: hostCACerts, Version: "v", Revision: "r", Created: testCreated}); err == nil ||
			!strings.Contains(err.Error(), "dynamically linked") {
			t.Errorf("Build with %s: %v, want it refused as dynamically linked", dyn, err)
		}
		df, _ := os.ReadFile(filepath.Join(root, "Dockerfile"))
		for name, edit := range map[string][2]string{
			"USER":       {"USER 65532:65532", "USER 0"},
			"ENTRYPOINT": {`ENTRYPOINT ["/portal"]`, `ENTRYPOINT ["/portal", "serve"]`},
			"ENV":        {"PORTAL_LISTEN=0.0.0.0:8080", "PORTAL_LISTEN=0.0.0.0:9090"},
			"LABEL":      {`org.opencontainers.image.licenses="Apache-2.0"`, `org.opencontainers.image.licenses="MIT"`},
		} {
			broken := strings.Replace(string(df), edit[0], edit[1], 1)
			if broken == string(df) {
				t.Errorf("the Dockerfile has no %q to break", edit[0])
				continue
			}
			if len(checkDockerfile(broken, cf.Config)) == 0 {
				t.Errorf("a Dockerfile with a different %s passed the checks", name)
			}
		}
	})
}

func fileSHA256(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func parseUser(u string) (uid, gid int, err error) {
	us, gs, ok := strings.Cut(u, ":")
	if !ok {
		return 0, 0, fmt.Errorf("user %q is not numeric uid:gid", u)
	}
	if uid, err = strconv.Atoi(us); err != nil {
		return 0, 0, fmt.Errorf("user %q is not numeric uid:gid", u)
	}
	if gid, err = strconv.Atoi(gs); err != nil {
		return 0, 0, fmt.Errorf("user %q is not numeric uid:gid", u)
	}
	return uid, gid, nil
}

// checkConfig lists what is wrong with the image's config and manifest.
func checkConfig(cf *v1.ConfigFile, m *v1.Manifest, created time.Time) []string {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		bad("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	c := cf.Config
	// A numeric non-root user (Kubernetes' runAsNonRoot can only verify a
	// numeric one), the same as the Dockerfile's.
	if uid, gid, err := parseUser(c.User); err != nil || uid == 0 || gid == 0 {
		bad("user %q: want a numeric non-root uid:gid", c.User)
	} else if uid != 65532 || gid != 65532 {
		bad("user %q, want 65532:65532", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/portal"}) {
		bad("entrypoint %q, want [/portal]", c.Entrypoint)
	}
	if !slices.Equal(c.Cmd, []string{"serve"}) {
		bad("cmd %q, want [serve]", c.Cmd)
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok || len(c.ExposedPorts) != 1 {
		bad("exposed ports %v, want 8080/tcp", c.ExposedPorts)
	}
	if _, ok := c.Volumes["/data"]; !ok || len(c.Volumes) != 1 {
		bad("volumes %v, want /data", c.Volumes)
	}
	if c.WorkingDir != "/" {
		bad("working dir %q, want /", c.WorkingDir)
	}
	for _, kv := range []string{"PORTAL_DB=/data/portal.db", "PORTAL_LISTEN=0.0.0.0:8080", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"} {
		if !slices.Contains(c.Env, kv) {
			bad("env %q lacks %s", c.Env, kv)
		}
	}
	want := map[string]string{
		"org.opencontainers.image.title":    "hyperpod-portal",
		"org.opencontainers.image.source":   "https://github.com/hyperpod-governance/portal",
		"org.opencontainers.image.version":  testVersion,
		"org.opencontainers.image.revision": testRevision,
		"org.opencontainers.image.created":  created.Format(time.RFC3339),
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	for k, v := range want {
		if c.Labels[k] != v {
			bad("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	if !cf.Created.Time.Equal(created) {
		bad("created %s, want %s", cf.Created.Time, created)
	}
	if len(cf.History) != len(cf.RootFS.DiffIDs) || len(m.Layers) != len(cf.RootFS.DiffIDs) {
		bad("%d history entries, %d diff ids, %d layers: want one each per layer", len(cf.History), len(cf.RootFS.DiffIDs), len(m.Layers))
	}
	for _, h := range cf.History {
		if !h.Created.Time.Equal(created) {
			bad("history %q created %s, want %s", h.CreatedBy, h.Created.Time, created)
		}
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
		bad("manifest %s with config %s, want OCI media types", m.MediaType, m.Config.MediaType)
	}
	for i, l := range m.Layers {
		if l.MediaType != types.OCILayer {
			bad("layer %d is %s, want %s", i, l.MediaType, types.OCILayer)
		}
	}
	return errs
}

// entry is one file of the image as its tar header says, with the body of
// the small ones.
type entry struct {
	tar.Header
	body []byte
}

// extract unpacks the image's layers into rootfs (owners too when running
// as root), checking each layer against its diff id, and returns the
// flattened file list by path ("data/" for directories).
func extract(t *testing.T, img v1.Image, rootfs string) map[string]entry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]entry{}
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		tr := tar.NewReader(io.TeeReader(rc, h))
		var names []string
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("layer %d: %v", i, err)
			}
			names = append(names, hdr.Name)
			clean := path.Clean(hdr.Name)
			if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
				t.Fatalf("layer %d: unsafe path %q", i, hdr.Name)
			}
			dst := filepath.Join(rootfs, filepath.FromSlash(clean))
			e := entry{Header: *hdr}
			switch hdr.Typeflag {
			case tar.TypeDir:
				if err := os.MkdirAll(dst, 0o755); err != nil {
					t.Fatal(err)
				}
			case tar.TypeReg:
				if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
					t.Fatal(err)
				}
				body, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(dst, body, 0o600); err != nil {
					t.Fatal(err)
				}
				if len(body) < 1<<20 {
					e.body = body
				}
			default:
				t.Fatalf("layer %d: %s has type %q; the image has only files and directories", i, hdr.Name, hdr.Typeflag)
			}
			files[hdr.Name] = e
		}
		if _, err := io.Copy(h, rc); err != nil { // tar padding
			t.Fatal(err)
		}
		rc.Close()
		if !sort.StringsAreSorted(names) {
			t.Errorf("layer %d's entries are not sorted: %q", i, names)
		}
		diffID, err := l.DiffID()
		if err != nil {
			t.Fatal(err)
		}
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != diffID.String() {
			t.Fatalf("layer %d: content %s, config says %s", i, got, diffID)
		}
	}
	// Modes and owners last, deepest first, so that a read-only directory
	// was still writable while it was being filled.
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	for _, n := range names {
		e := files[n]
		dst := filepath.Join(rootfs, filepath.FromSlash(path.Clean(n)))
		if os.Geteuid() == 0 {
			if err := os.Lchown(dst, e.Uid, e.Gid); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(dst, e.FileInfo().Mode()&(os.ModePerm|os.ModeSticky|os.ModeSetuid|os.ModeSetgid)); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// checkFiles lists what is wrong with the image's files: exactly these,
// with these owners and modes, every mtime the creation time, /portal
// root's and read-only, /data and /tmp writable by 65532, the nonroot user
// and group named, and the CA bundle the build machine's.
func checkFiles(files map[string]entry, created time.Time, certs []byte) []string {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	type want struct {
		dir      bool
		mode     int64
		uid, gid int
	}
	wants := map[string]want{
		"data/":                             {true, 0o700, 65532, 65532},
		"etc/":                              {true, 0o755, 0, 0},
		"etc/group":                         {false, 0o644, 0, 0},
		"etc/passwd":                        {false, 0o644, 0, 0},
		"etc/ssl/":                          {true, 0o755, 0, 0},
		"etc/ssl/certs/":                    {true, 0o755, 0, 0},
		"etc/ssl/certs/ca-certificates.crt": {false, 0o644, 0, 0},
		"home/":                             {true, 0o755, 0, 0},
		"home/nonroot/":                     {true, 0o700, 65532, 65532},
		"portal":                            {false, 0o555, 0, 0},
		"tmp/":                              {true, 0o1777, 0, 0},
	}
	for name, e := range files {
		w, ok := wants[name]
		if !ok {
			bad("unexpected file %s", name)
			continue
		}
		if (e.Typeflag == tar.TypeDir) != w.dir || (!w.dir && e.Typeflag != tar.TypeReg) {
			bad("%s has type %q", name, e.Typeflag)
		}
		if e.Mode != w.mode || e.Uid != w.uid || e.Gid != w.gid {
			bad("%s: mode %#o owner %d:%d, want mode %#o owner %d:%d", name, e.Mode, e.Uid, e.Gid, w.mode, w.uid, w.gid)
		}
		if !e.ModTime.Equal(created) {
			bad("%s: mtime %s, want %s (reproducible)", name, e.ModTime, created)
		}
	}
	for name := range wants {
		if _, ok := files[name]; !ok {
			bad("missing %s", name)
		}
	}
	// What the rules above mean, checked from the headers as they are.
	if e, ok := files["portal"]; ok && (e.Uid == 65532 || e.Mode&0o222 != 0) {
		bad("/portal can be changed by the user it runs as (owner %d, mode %#o)", e.Uid, e.Mode)
	}
	for _, d := range []string{"data/", "tmp/"} {
		if e, ok := files[d]; ok && !writableBy(e, 65532, 65532) {
			bad("/%s is not writable by 65532 (owner %d:%d, mode %#o)", d, e.Uid, e.Gid, e.Mode)
		}
	}
	if !regexp.MustCompile(`(?m)^nonroot:x:65532:65532:`).Match(files["etc/passwd"].body) {
		bad("/etc/passwd has no nonroot user 65532:65532: %q", files["etc/passwd"].body)
	}
	if !regexp.MustCompile(`(?m)^nonroot:x:65532:`).Match(files["etc/group"].body) {
		bad("/etc/group has no nonroot group 65532: %q", files["etc/group"].body)
	}
	if b := files["etc/ssl/certs/ca-certificates.crt"].body; !bytes.Equal(b, certs) {
		bad("the CA bundle (%d bytes) is not the build machine's (%d bytes)", len(b), len(certs))
	} else if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(b) {
		bad("the CA bundle holds no certificate")
	}
	return errs
}

func writableBy(e entry, uid, gid int) bool {
	switch {
	case e.Uid == uid:
		return e.Mode&0o300 == 0o300
	case e.Gid == gid:
		return e.Mode&0o030 == 0o030
	}
	return e.Mode&0o003 == 0o003
}

// checkStatic: no program interpreter and no needed shared library, so the
// binary runs on an empty base.
func checkStatic(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s has a program interpreter (PT_INTERP): dynamically linked", p)
		}
	}
	libs, err := f.DynString(elf.DT_NEEDED)
	if err != nil {
		return fmt.Errorf("%s: %v", p, err)
	}
	if len(libs) > 0 {
		return fmt.Errorf("%s needs shared libraries (DT_NEEDED) %q", p, libs)
	}
	return nil
}

// serve starts cmd (portal serve), waits for its ready line, checks that
// /healthz and /readyz answer 200, and stops it with SIGTERM.
func serve(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	s := testenv.StartServe(t, cmd)
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(s.URL + p)
		if err != nil {
			t.Fatalf("GET %s: %v\n%s", p, err, s.Out.String())
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %s\n%s", p, resp.StatusCode, b, s.Out.String())
		}
	}
	s.Stop()
}

// checkDockerfile lists where the Dockerfile's final stage disagrees with
// the image make image builds: user, working directory, entrypoint,
// command, volume, port, PORTAL_* environment and labels (version,
// revision and created come from build args there).
func checkDockerfile(text string, c v1.Config) []string {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	var lines []string
	var cur strings.Builder
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if cur.Len() == 0 && (l == "" || strings.HasPrefix(l, "#")) {
			continue
		}
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(l)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	last := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.ToUpper(l), "FROM ") {
			last = i
		}
	}
	if last < 0 {
		return []string{"the Dockerfile has no FROM"}
	}
	if !strings.Contains(lines[last], "distroless/static") || !strings.HasSuffix(lines[last], ":nonroot") {
		bad("final stage %q: want distroless static :nonroot (its /etc/passwd names 65532 nonroot)", lines[last])
	}
	got := v1.Config{Labels: map[string]string{}, ExposedPorts: map[string]struct{}{}, Volumes: map[string]struct{}{}}
	args := map[string]string{}
	for _, l := range lines[last+1:] {
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		var list []string
		switch strings.ToUpper(instr) {
		case "USER":
			got.User = rest
		case "WORKDIR":
			got.WorkingDir = rest
		case "ENTRYPOINT", "CMD", "VOLUME":
			if err := json.Unmarshal([]byte(rest), &list); err != nil {
				bad("%s %s: want the JSON form: %v", instr, rest, err)
			}
			switch strings.ToUpper(instr) {
			case "ENTRYPOINT":
				got.Entrypoint = list
			case "CMD":
				got.Cmd = list
			default:
				for _, v := range list {
					got.Volumes[v] = struct{}{}
				}
			}
		case "EXPOSE":
			for _, p := range strings.Fields(rest) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				got.ExposedPorts[p] = struct{}{}
			}
		case "ARG":
			k, v, _ := strings.Cut(rest, "=")
			args[k] = v
		case "ENV", "LABEL":
			for _, kv := range strings.Fields(rest) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					bad("%s %s: want key=value pairs", instr, rest)
					continue
				}
				if uq, err := strconv.Unquote(v); err == nil {
					v = uq
				}
				if strings.ToUpper(instr) == "ENV" {
					got.Env = append(got.Env, k+"="+v)
				} else {
					got.Labels[k] = v
				}
			}
		}
	}
	if got.User != c.User {
		bad("Dockerfile USER %q, image %q", got.User, c.User)
	}
	if got.WorkingDir != c.WorkingDir {
		bad("Dockerfile WORKDIR %q, image %q", got.WorkingDir, c.WorkingDir)
	}
	if !slices.Equal(got.Entrypoint, c.Entrypoint) {
		bad("Dockerfile ENTRYPOINT %q, image %q", got.Entrypoint, c.Entrypoint)
	}
	if !slices.Equal(got.Cmd, c.Cmd) {
		bad("Dockerfile CMD %q, image %q", got.Cmd, c.Cmd)
	}
	if !sameKeys(got.Volumes, c.Volumes) {
		bad("Dockerfile VOLUME %v, image %v", got.Volumes, c.Volumes)
	}
	if !sameKeys(got.ExposedPorts, c.ExposedPorts) {
		bad("Dockerfile EXPOSE %v, image %v", got.ExposedPorts, c.ExposedPorts)
	}
	// The base supplies PATH and SSL_CERT_FILE; PORTAL_* are the
	// Dockerfile's own and must be the same.
	var imagePortal []string
	for _, kv := range c.Env {
		if strings.HasPrefix(kv, "PORTAL_") {
			imagePortal = append(imagePortal, kv)
		}
	}
	slices.Sort(imagePortal)
	slices.Sort(got.Env)
	if !slices.Equal(got.Env, imagePortal) {
		bad("Dockerfile ENV %q, image's PORTAL_* %q", got.Env, imagePortal)
	}
	fromArg := map[string]string{
		"org.opencontainers.image.version":  "VERSION",
		"org.opencontainers.image.revision": "REVISION",
		"org.opencontainers.image.created":  "CREATED",
	}
	for k, v := range c.Labels {
		dv, ok := got.Labels[k]
		switch {
		case !ok:
			bad("Dockerfile has no LABEL %s", k)
		case fromArg[k] != "":
			if _, declared := args[fromArg[k]]; dv != "${"+fromArg[k]+"}" || !declared {
				bad("Dockerfile LABEL %s=%q: want ${%s} from ARG %s", k, dv, fromArg[k], fromArg[k])
			}
		case dv != v:
			bad("Dockerfile LABEL %s=%q, image %q", k, dv, v)
		}
	}
	for k := range got.Labels {
		if _, ok := c.Labels[k]; !ok {
			bad("Dockerfile LABEL %s is not on the image", k)
		}
	}
	return errs
}

func sameKeys(a, b map[string]struct{}) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// TestWriteLayoutReplacesOnlyALayout: a second write replaces the layout
// (one image in it, not two); a file or a non-empty directory that is not a
// layout is left alone.
func TestWriteLayoutReplacesOnlyALayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "layout")
	for range 2 {
		if err := image.WriteLayout(dir, "x", empty.Image); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	if im, err := idx.IndexManifest(); err != nil || len(im.Manifests) != 1 {
		t.Fatalf("after two writes the layout holds %v manifests (%v), want 1", im, err)
	}
	other := t.TempDir()
	keep := filepath.Join(other, "keep")
	if err := os.WriteFile(keep, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{other, keep} {
		if err := image.WriteLayout(target, "x", empty.Image); err == nil {
			t.Errorf("WriteLayout(%s) replaced something that is not an OCI layout", target)
		}
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "mine" {
		t.Errorf("%s after the refused writes: %q, %v", keep, b, err)
	}
}
