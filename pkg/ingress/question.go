package ingress

import (
	"encoding/json"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// questionChars bounds the question a job summary shows.
const questionChars = 200

// questionOf is the text of a stored request's last user turn (wire.Stored), or a
// direct search's query, or "".
func questionOf(req json.RawMessage) string {
	if st, err := wire.DecodeStored(req); err == nil {
		return wire.LatestUserText(st.Request.Messages)
	}
	var r struct {
		Query string `json:"query"`
	}
	json.Unmarshal(req, &r)
	return r.Query
}
