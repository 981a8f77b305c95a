package chaos

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"
)

// balancer is a round-robin reverse proxy over the ingress replicas, as a load
// balancer in front of them would be: a request goes to the next replica that is
// running, and a replica that dies under a request makes it a 502 (which clients
// retry). It counts the requests each replica has in flight, so a kill can be timed
// to land on some.
type balancer struct {
	srv      *http.Server
	url      string
	inflight []atomic.Int64
}

// countingTransport counts requests in flight per target host.
type countingTransport struct {
	http.RoundTripper
	index map[string]int
	b     *balancer
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	i := t.index[r.URL.Host]
	t.b.inflight[i].Add(1)
	defer t.b.inflight[i].Add(-1)
	return t.RoundTripper.RoundTrip(r)
}

// startBalancer serves the balancer on a free loopback port.
func startBalancer(replicas []*Proc, ports []int) (*balancer, error) {
	b := &balancer{inflight: make([]atomic.Int64, len(ports))}
	index := map[string]int{}
	var next atomic.Uint64
	targets := make([]*url.URL, len(ports))
	for i, p := range ports {
		targets[i] = &url.URL{Scheme: "http", Host: hostPort(p)}
		index[hostPort(p)] = i
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			n := next.Add(1)
			t := targets[n%uint64(len(targets))]
			for k := range uint64(len(targets)) {
				if i := (n + k) % uint64(len(targets)); replicas[i].Running() {
					t = targets[i]
					break
				}
			}
			pr.SetURL(t)
		},
		Transport: countingTransport{index: index, b: b, RoundTripper: &http.Transport{MaxIdleConnsPerHost: 128, IdleConnTimeout: 30 * time.Second,
			DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b.srv = &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	b.url = "http://" + ln.Addr().String()
	go b.srv.Serve(ln)
	return b, nil
}
