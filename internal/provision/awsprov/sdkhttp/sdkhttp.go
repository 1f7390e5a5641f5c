// Package sdkhttp is the HTTP client the portal gives its aws-sdk-go-v2
// clients: the SDK's own default transport, with one fix.
//
// smithy-go (v1.28.9) wraps a request body so that it can close it as soon
// as the response headers arrive; the wrapper's WriteTo then answers
// io.EOF as an error. When net/http's write loop is still finishing the
// request at that moment (its final read for extra bytes), the write fails
// with "EOF", the transport closes the connection, and reading a response
// body bigger than the transport's buffer fails with "use of closed network
// connection". A big ListDomains page hit it about once in thirty calls
// under load. The fix hands the transport its own in-memory copy of the
// body, so the SDK closing its wrapper no longer reaches the connection.
// Request bodies here are small JSON documents.
package sdkhttp

import (
	"bytes"
	"io"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Client is an HTTP client with the SDK's default transport settings whose
// requests carry a copy of their body.
func Client() *http.Client {
	return &http.Client{Transport: CopyBody{Next: awshttp.NewBuildableClient().GetTransport()}}
}

// CopyBody is a RoundTripper that reads the request body into memory and
// sends a copy (closing the original, as a RoundTripper must).
type CopyBody struct{ Next http.RoundTripper }

// RoundTrip sends r with a copy of its body.
func (c CopyBody) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return c.Next.RoundTrip(r)
	}
	b, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	cp := r.Clone(r.Context())
	cp.Body = io.NopCloser(bytes.NewReader(b))
	cp.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	cp.ContentLength = int64(len(b))
	return c.Next.RoundTrip(cp)
}
