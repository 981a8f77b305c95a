package h2async_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/searchfleet/searchfleet/internal/h2async"
)

// Start returns at once; done runs on a goroutine of its own once the response
// headers arrive, and must close the body.
func ExampleTransport_Start() {
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello over %s", r.Proto)
	}))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	defer ts.Close()

	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	tr := &h2async.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	defer tr.CloseIdleConnections()

	req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
	finished := make(chan struct{})
	tr.Start(req, func(resp *http.Response, err error) {
		defer close(finished)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.Proto, resp.StatusCode, string(body))
	})
	<-finished
	// Output: HTTP/2.0 200 hello over HTTP/2.0
}
