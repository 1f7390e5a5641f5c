// Package static embeds the portal's stylesheet, scripts and images, served
// under /static/. No CDN: everything the pages need ships in the binary. This
// package must not import anything.
package static

import "embed"

// FS holds the static assets.
//
//go:embed *.css *.js
var FS embed.FS
