package ingress

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/searchfleet/searchfleet/pkg/fetch"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// fileURLsTimeout bounds reading all the files one request gives by URL (each read
// is also bounded by FLEET_FETCH_TIMEOUT): the client waits for them before its job
// is queued.
const fileURLsTimeout = 30 * time.Second

// readFileURLs returns req with the files it gives by URL that api cannot take by URL
// read (wire.ReadFileURLs), once, at submission: through s.FileURLs (the web_fetch
// guard: public addresses only unless FLEET_FETCH_ALLOW admits others, no
// credentials, at most fetch.MaxRedirects redirects), within ctx and fileURLsTimeout,
// and together at most s.MaxBody bytes, the most a file given to a model may have
// (fileData). A URL that cannot be read is a 400 naming its parameter and why.
func (s *Server) readFileURLs(ctx context.Context, req *wire.Request, api wire.ModelAPI) (*wire.Request, error) {
	ctx, cancel := context.WithTimeout(ctx, fileURLsTimeout)
	defer cancel()
	left := s.MaxBody
	return wire.ReadFileURLs(req, api, func(url string) ([]byte, string, error) {
		if s.FileURLs == nil {
			return nil, "", errors.New("this server does not read files by URL; send the file as file_data")
		}
		if left <= 0 {
			return nil, "", fmt.Errorf("the files given by URL in this request together exceed %d bytes", s.MaxBody)
		}
		f, err := s.FileURLs.FetchFile(ctx, url, left)
		switch {
		case err != nil:
			return nil, "", fmt.Errorf("the files given by URL were not read within %s", fileURLsTimeout)
		case f.Error != nil && f.Error.Type == fetch.ErrLimit && left < s.MaxBody:
			return nil, "", fmt.Errorf("the files given by URL in this request together exceed %d bytes", s.MaxBody)
		case f.Error != nil:
			return nil, "", errors.New(f.Error.Message)
		}
		left -= int64(len(f.Content))
		return f.Content, f.ContentType, nil
	})
}
