package api_test

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// A browser's cross-site POST to a body-less cancel endpoint is refused in the
// protocol's error shape, whether the browser says so with Sec-Fetch-Site or only
// with a foreign Origin; a same-origin request and an API client's (neither header)
// reach the route.
func TestCrossOriginCancelRefused(t *testing.T) {
	t.Parallel()
	h := batchAPI(t)
	for _, path := range []string{"/v1/jobs/job_abcdef/cancel", "/v1/batches/batch_abcdef/cancel", "/v1/messages"} {
		for _, hdr := range []map[string]string{
			{"Sec-Fetch-Site": "cross-site"},
			{"Sec-Fetch-Site": "same-site"},
			{"Origin": "https://evil.example"},
		} {
			req := httptest.NewRequest("POST", path, nil).WithContext(t.Context())
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			want := `"code":"cross_origin_request"`
			if path == "/v1/messages" {
				want = `"type":"permission_error"`
			}
			if rec.Code != 403 || !strings.Contains(rec.Body.String(), want) {
				t.Errorf("POST %s with %v: %d %s", path, hdr, rec.Code, rec.Body)
			}
		}
	}
	for _, hdr := range []map[string]string{{}, {"Sec-Fetch-Site": "same-origin"}, {"Origin": "http://example.com"}} {
		req := httptest.NewRequest("POST", "/v1/jobs/job_abcdef/cancel", nil).WithContext(t.Context())
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 404 { // reaches the route: no such job
			t.Errorf("POST cancel with %v: %d %s", hdr, rec.Code, rec.Body)
		}
	}
}
