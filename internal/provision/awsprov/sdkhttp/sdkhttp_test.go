package sdkhttp

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// closingBody is a body that, like smithy-go's wrapper, stops giving data
// once closed: closed from another goroutine right after the round trip
// starts, as the SDK does when the response headers arrive.
type closingBody struct {
	mu     sync.Mutex
	r      io.Reader
	closed bool
}

func (b *closingBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, io.EOF
	}
	return b.r.Read(p)
}

func (b *closingBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

type recorder struct {
	body     string
	original io.ReadCloser
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == r.original {
		return nil, errors.New("the transport got the SDK's own body")
	}
	_ = r.original.Close() // the SDK closes its body meanwhile
	if req.Body == nil {
		r.body = ""
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	}
	b, err := io.ReadAll(req.Body)
	r.body = string(b)
	return &http.Response{StatusCode: 200, Body: http.NoBody}, err
}

func TestCopyBodyOutlivesTheSDKsClose(t *testing.T) {
	orig := &closingBody{r: strings.NewReader(`{"MaxResults":100}`)}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", orig)
	rec := &recorder{original: orig}
	if _, err := (CopyBody{Next: rec}).RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if rec.body != `{"MaxResults":100}` || req.Body != orig {
		t.Errorf("transport read %q; want the whole body, and the caller's request untouched", rec.body)
	}
	if !orig.closed {
		t.Error("the original body was not closed")
	}
	if _, err := (CopyBody{Next: rec}).RoundTrip(mustReq(t, nil)); err != nil {
		t.Errorf("no body: %v", err)
	}
}

func mustReq(t *testing.T, body io.Reader) *http.Request {
	r, err := http.NewRequest(http.MethodGet, "http://127.0.0.1/", body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
