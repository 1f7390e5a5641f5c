package views

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/hyperpod-governance/portal/internal/evidence"
)

// EvidenceView is the printable evidence bundle of a connection: the
// bundle, what the portal's verification checked before serving it, and
// links back to the connection, to the JSON download and to the
// installation's published signing key.
type EvidenceView struct {
	Bundle  evidence.Bundle
	Checked []string
	ConnURL string
	JSONURL string
	KeyURL  string
}

// prettyJSON indents a raw JSON value for reading; the raw text when it
// does not parse.
func prettyJSON(raw []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return string(raw)
	}
	return out.String()
}

// accelHours renders accelerator-seconds as hours with one decimal.
func accelHours(seconds int64) string {
	return strconv.FormatFloat(float64(seconds)/3600, 'f', 1, 64)
}

// shortHash is a hash's first 12 characters, for tables; the full hash
// is in the title and the JSON.
func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
