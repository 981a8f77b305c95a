package chaos

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"
)

// startBalancer serves a round-robin reverse proxy over the ingress replicas on a
// free loopback port, as a load balancer in front of them would: a request goes to
// the next replica that is running, and a replica that dies under a request makes
// it a 502 (which clients retry). It returns the balancer's base URL.
func startBalancer(replicas []*proc, ports []int) (string, *http.Server, error) {
	var next atomic.Uint64
	targets := make([]*url.URL, len(ports))
	for i, p := range ports {
		targets[i] = &url.URL{Scheme: "http", Host: hostPort(p)}
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			n := next.Add(1)
			t := targets[n%uint64(len(targets))]
			for k := range uint64(len(targets)) {
				if i := (n + k) % uint64(len(targets)); replicas[i].running() {
					t = targets[i]
					break
				}
			}
			pr.SetURL(t)
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 128, IdleConnTimeout: 30 * time.Second, DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), srv, nil
}
