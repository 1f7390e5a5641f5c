// Package image builds the portal's container image without a Docker engine,
// with go-containerregistry (github.com/google/go-containerregistry): the
// static portal binary on an empty base (FROM scratch), plus the few files a
// Go server needs, in two OCI layers:
//
//   - base: /etc/passwd and /etc/group naming the non-root user nonroot
//     (65532:65532, as in distroless' nonroot images, which the Dockerfile
//     uses), the Debian CA bundle at /etc/ssl/certs/ca-certificates.crt,
//     /data (the SQLite volume) and /home/nonroot owned by 65532, and /tmp
//     (sticky, writable by everyone);
//   - app: /portal, owned by root and read-only for everyone.
//
// The config runs /portal serve as 65532:65532 and carries the OCI labels
// (org.opencontainers.image.*). The build is reproducible: every file's mtime
// is the image's creation time (the commit's time, as SOURCE_DATE_EPOCH),
// entries are sorted, and the layers are gzipped by Go's compress/gzip, so the
// same binary, CA bundle, labels and Go toolchain give the same digest.
//
// hack/image is the command (`make image`); the Dockerfile makes the same
// image for people with Docker (internal/support/image's test checks that the two
// agree on user, entrypoint, command, environment, ports and labels).
package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/x509"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed settings. The Dockerfile repeats them (USER, ENTRYPOINT,
// CMD, ENV, EXPOSE, VOLUME, WORKDIR, LABEL).
const (
	// UID and GID of the user the portal runs as: distroless' "nonroot".
	UID = 65532
	GID = 65532
	// Title is the org.opencontainers.image.title label and the default
	// repository name of the docker-archive tag.
	Title = "hyperpod-portal"
	// Source is the org.opencontainers.image.source label: the repository
	// named by the module path.
	Source = "https://github.com/hyperpod-governance/portal"
	// Licenses is the org.opencontainers.image.licenses label's default:
	// the SPDX id of the repository's LICENSE, chosen to fit every
	// dependency's license (docs/licenses.md; license_test.go checks both).
	Licenses = "Apache-2.0"
	// CACertsPath is where Go's crypto/x509 looks first on Linux, and where
	// Debian's ca-certificates package writes its bundle.
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
)

// Env is the image's environment: the distroless base's PATH and
// SSL_CERT_FILE, and the Dockerfile's PORTAL_DB and PORTAL_LISTEN.
var Env = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"SSL_CERT_FILE=" + CACertsPath,
	"PORTAL_DB=/data/portal.db",
	"PORTAL_LISTEN=0.0.0.0:8080",
}

// Label keys (OCI image spec, annotations.md: pre-defined annotation keys,
// which image configs use as labels).
const (
	LabelTitle    = "org.opencontainers.image.title"
	LabelSource   = "org.opencontainers.image.source"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelCreated  = "org.opencontainers.image.created"
	LabelLicenses = "org.opencontainers.image.licenses"
)

// Options are the inputs of Build; the same options give the same image.
type Options struct {
	Binary  string // the static linux portal binary (make build)
	CACerts string // PEM bundle to install at CACertsPath
	// Version, Revision and Created become labels; Created is also every
	// file's mtime and the config's creation time.
	Version  string
	Revision string
	Created  time.Time
	Licenses string // default Licenses
	// Arch, when set, must be the binary's architecture (GOARCH name);
	// the image's platform is always read from the binary itself.
	Arch string
}

// Build makes the image. It refuses a binary that is not a static Linux ELF
// executable, and a CA bundle with no certificate in it.
func Build(o Options) (v1.Image, error) {
	if o.Version == "" || o.Revision == "" {
		return nil, errors.New("image: --version and --revision are required (make image passes git's)")
	}
	if o.Created.IsZero() {
		return nil, errors.New("image: a creation time is required (--created or SOURCE_DATE_EPOCH)")
	}
	created := o.Created.UTC().Truncate(time.Second)
	if o.Licenses == "" {
		o.Licenses = Licenses
	}
	arch, err := StaticELF(o.Binary)
	if err != nil {
		return nil, err
	}
	if o.Arch != "" && o.Arch != arch {
		return nil, fmt.Errorf("image: %s is a linux/%s binary, not linux/%s (build it with GOARCH=%s)", o.Binary, arch, o.Arch, o.Arch)
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("image: CA certificates: %w (Debian: apt-get install ca-certificates)", err)
	}
	if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(certs) {
		return nil, fmt.Errorf("image: %s holds no PEM certificate", o.CACerts)
	}

	base, err := layer(created, baseFiles(certs))
	if err != nil {
		return nil, err
	}
	app, err := layer(created, []file{{name: "portal", mode: 0o555, body: bin}})
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: created},
			CreatedBy: "hack/image: /etc/passwd, /etc/group, " + CACertsPath + ", /data, /home/nonroot, /tmp"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: v1.Time{Time: created},
			CreatedBy: "hack/image: /portal " + o.Version}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: created}
	cf.Config = v1.Config{
		User:         fmt.Sprintf("%d:%d", UID, GID),
		Entrypoint:   []string{"/portal"},
		Cmd:          []string{"serve"},
		Env:          append([]string(nil), Env...),
		ExposedPorts: map[string]struct{}{"8080/tcp": {}},
		Volumes:      map[string]struct{}{"/data": {}},
		WorkingDir:   "/",
		Labels: map[string]string{
			LabelTitle:    Title,
			LabelSource:   Source,
			LabelVersion:  o.Version,
			LabelRevision: o.Revision,
			LabelCreated:  created.Format(time.RFC3339),
			LabelLicenses: o.Licenses,
		},
	}
	return mutate.ConfigFile(img, cf)
}

// StaticELF checks that path is a statically linked Linux ELF executable (no
// program interpreter, no needed shared library: it runs on an empty base)
// and returns its architecture as a GOARCH name.
func StaticELF(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("image: %s: %w (not an ELF executable: build it with make build)", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("image: %s is dynamically linked (it has a program interpreter): build it with CGO_ENABLED=0", path)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return "", fmt.Errorf("image: %s: %w", path, err)
	}
	if len(libs) > 0 {
		return "", fmt.Errorf("image: %s needs shared libraries %v: build it with CGO_ENABLED=0", path, libs)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", fmt.Errorf("image: %s is not an executable (%s)", path, f.Type)
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	}
	return "", fmt.Errorf("image: %s is for %s; the image supports amd64 and arm64", path, f.Machine)
}

// file is one tar entry; a name ending in "/" is a directory.
type file struct {
	name     string
	mode     int64
	uid, gid int
	body     []byte
}

func baseFiles(certs []byte) []file {
	// The same users and groups as distroless' base images (root, nobody,
	// nonroot); the portal runs as nonroot.
	passwd := "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		fmt.Sprintf("nonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, GID)
	group := "root:x:0:\nnobody:x:65534:\n" + fmt.Sprintf("nonroot:x:%d:\n", GID)
	return []file{
		{name: "data/", mode: 0o700, uid: UID, gid: GID},
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: strings.TrimPrefix(CACertsPath, "/"), mode: 0o644, body: certs},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: UID, gid: GID},
		{name: "tmp/", mode: 0o1777},
	}
}

// layer makes a gzipped OCI layer of files, sorted by name, each with mtime
// created and numeric owners only (no user or group names).
func layer(created time.Time, files []file) (v1.Layer, error) {
	files = append([]file(nil), files...)
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: created, Format: tar.FormatUSTAR}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("image: %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.DefaultCompression), tarball.WithCompressedCaching)
}

// WriteLayout writes img as the only image of an OCI image layout in dir,
// with ref as its org.opencontainers.image.ref.name (skopeo copy
// oci:DIR:REF ...). An existing layout in dir is replaced; any other
// non-empty directory is refused. The layout appears whole or not at all.
func WriteLayout(dir, ref string, img v1.Image) error {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("image: %s is a file, not an OCI layout directory: not replacing it", dir)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
			return fmt.Errorf("image: %s is a non-empty directory and not an OCI layout: not replacing it", dir)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	if err := p.AppendImage(img,
		layout.WithPlatform(v1.Platform{OS: cf.OS, Architecture: cf.Architecture}),
		layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// WriteDockerArchive writes img as a docker-archive tarball (docker load -i)
// tagged tag, whole or not at all.
func WriteDockerArchive(path, tag string, img v1.Image) error {
	t, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("image: tag %q: %w", tag, err)
	}
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, t, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("image: %w", err)
	}
	return os.Rename(tmp, path)
}
