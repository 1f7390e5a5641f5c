// Command image builds the portal's container image without a Docker engine
// (make image): an OCI image layout directory and a docker-archive tarball of
// the static binary from make build. See internal/support/image for what is in it.
//
//	go run ./hack/image --binary bin/portal --version v1.2.3 \
//	    --revision "$(git rev-parse HEAD)" --created "$(git log -1 --format=%ct)"
//
// The image's platform is the binary's (make image GOARCH=arm64 builds an
// arm64 binary and so an arm64 image).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/hyperpod-governance/portal/internal/support/image"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var o image.Options
	fs.StringVar(&o.Binary, "binary", "bin/portal", "the static portal binary (make build)")
	fs.StringVar(&o.CACerts, "ca-certs", image.CACertsPath, "PEM bundle of CA certificates to install (Debian's ca-certificates)")
	fs.StringVar(&o.Version, "version", "", "version label (make image: git describe)")
	fs.StringVar(&o.Revision, "revision", "", "revision label: the commit (make image: git rev-parse HEAD)")
	created := fs.String("created", os.Getenv("SOURCE_DATE_EPOCH"), "creation time and every file's mtime: Unix seconds or RFC 3339 (default $SOURCE_DATE_EPOCH; make image: the commit's time)")
	fs.StringVar(&o.Licenses, "licenses", image.Licenses, "licenses label (SPDX expression)")
	fs.StringVar(&o.Arch, "arch", "", "expected architecture of the binary (GOARCH name); empty: whatever the binary is")
	dir := fs.String("oci-layout", "bin/image", "OCI image layout directory to write (replaced); empty: none")
	tarPath := fs.String("tar", "bin/portal-image.tar", "docker-archive tarball to write (docker load -i); empty: none")
	tag := fs.String("tag", "", "tag of the image in the tarball and ref name in the layout (default "+image.Title+":<version>)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("image: unexpected arguments %v", fs.Args())
	}
	t, err := parseTime(*created)
	if err != nil {
		return err
	}
	o.Created = t
	if *tag == "" {
		*tag = image.Title + ":" + o.Version
	}
	img, err := image.Build(o)
	if err != nil {
		return err
	}
	ref := *tag
	if i := strings.LastIndex(ref, ":"); i >= 0 {
		ref = ref[i+1:]
	}
	if *dir != "" {
		if err := image.WriteLayout(*dir, ref, img); err != nil {
			return err
		}
	}
	if *tarPath != "" {
		if err := image.WriteDockerArchive(*tarPath, *tag, img); err != nil {
			return err
		}
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	size, err := compressedSize(img)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	fmt.Printf("image %s %s (linux/%s, %d bytes compressed)\n", *tag, digest, cf.Architecture, size)
	if *dir != "" {
		fmt.Printf("  OCI layout:     %s (skopeo copy oci:%s:%s docker://REGISTRY/%s)\n", *dir, *dir, ref, *tag)
	}
	if *tarPath != "" {
		fmt.Printf("  docker-archive: %s (docker load -i %s)\n", *tarPath, *tarPath)
	}
	return nil
}

// parseTime reads Unix seconds (SOURCE_DATE_EPOCH) or RFC 3339.
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, errors.New("image: --created (or SOURCE_DATE_EPOCH) is required: make image passes the commit's time")
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("image: --created %q: Unix seconds or RFC 3339", s)
	}
	return t, nil
}

// compressedSize is what a registry stores: manifest, config and layers.
func compressedSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}
