package h2async

import (
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"
)

// A request that does not set Accept-Encoding asks for gzip and reads the answer
// decompressed, as net/http does; one that sets it gets the bytes as sent.
func TestGzipIsAskedForAndDecompressed(t *testing.T) {
	const text = "data: the answer streams in\n\n"
	ts := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept-Encoding") != "gzip" {
			io.WriteString(w, "plain:"+r.Header.Get("Accept-Encoding"))
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		io.WriteString(zw, strings.Repeat(text, 100))
		zw.Close()
	}))
	tr := newTransport(t, ts.Certificate())

	req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
	r := await(t, startAsync(tr, req))
	if r.err != nil {
		t.Fatal(r.err)
	}
	b, err := io.ReadAll(r.resp.Body)
	r.resp.Body.Close()
	if err != nil || string(b) != strings.Repeat(text, 100) {
		t.Fatalf("body %.60q…, %v; want the decompressed text", b, err)
	}
	if !r.resp.Uncompressed || r.resp.Header.Get("Content-Encoding") != "" || r.resp.ContentLength != -1 {
		t.Errorf("Uncompressed %v, Content-Encoding %q, ContentLength %d; want true, none, -1",
			r.resp.Uncompressed, r.resp.Header.Get("Content-Encoding"), r.resp.ContentLength)
	}

	req, _ = http.NewRequest(http.MethodGet, ts.URL, nil)
	req.Header.Set("Accept-Encoding", "identity")
	if got := mustDo(t, tr, req); got != "plain:identity" {
		t.Errorf("with the caller's Accept-Encoding: %q", got)
	}
	tr2 := newTransport(t, ts.Certificate())
	tr2.DisableCompression = true
	req, _ = http.NewRequest(http.MethodGet, ts.URL, nil)
	if got := mustDo(t, tr2, req); got != "plain:" {
		t.Errorf("with DisableCompression: %q", got)
	}
}
