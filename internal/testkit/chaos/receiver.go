package chaos

import (
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// receiver is the clients' callback endpoint: it verifies every delivery's Standard
// Webhooks signature and records, per job, the webhook-ids and statuses it was told.
// It can be taken down (its listener closed: connections refused) and brought back on
// the same port.
type receiver struct {
	wh   *standardwebhooks.Webhook
	addr string

	mu     sync.Mutex
	srv    *http.Server
	jobs   map[string]*hooks
	badSig int
	total  int
}

// hooks is what one job's callback was told.
type hooks struct {
	ids      map[string]int  // terminal webhook-id → deliveries
	statuses map[string]bool // data.status of those deliveries
	first    time.Time
}

func newReceiver(secret, addr string) (*receiver, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return nil, err
	}
	return &receiver{wh: wh, addr: addr, jobs: map[string]*hooks{}}, nil
}

func (rv *receiver) up() error {
	ln, err := net.Listen("tcp", rv.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(rv.serve), ReadHeaderTimeout: 5 * time.Second}
	rv.mu.Lock()
	rv.srv = srv
	rv.mu.Unlock()
	go srv.Serve(ln)
	return nil
}

// down closes the listener and every open connection: deliveries fail until up.
func (rv *receiver) down() {
	rv.mu.Lock()
	srv := rv.srv
	rv.srv = nil
	rv.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

func (rv *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		return
	}
	if err := rv.wh.Verify(body, r.Header); err != nil {
		rv.mu.Lock()
		rv.badSig++
		rv.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var p struct {
		Type string `json:"type"`
		Data struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Data.ID == "" {
		http.Error(w, "not a job event", http.StatusBadRequest)
		return
	}
	id := r.Header.Get("webhook-id")
	rv.mu.Lock()
	rv.total++
	if strings.HasPrefix(p.Type, "job.") || strings.HasPrefix(p.Type, "research.") && p.Type != "research.requires_action" {
		h := rv.jobs[p.Data.ID]
		if h == nil {
			h = &hooks{ids: map[string]int{}, statuses: map[string]bool{}, first: time.Now()}
			rv.jobs[p.Data.ID] = h
		}
		h.ids[id]++
		h.statuses[p.Data.Status] = true
	}
	rv.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// get returns a copy of what job id's callback was told (nil: nothing).
func (rv *receiver) get(id string) *hooks {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	h := rv.jobs[id]
	if h == nil {
		return nil
	}
	return &hooks{ids: maps.Clone(h.ids), statuses: maps.Clone(h.statuses), first: h.first}
}

func (rv *receiver) has(id string) bool {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.jobs[id] != nil
}
