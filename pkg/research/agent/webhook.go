package agent

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Webhook is a provider's verified webhook about one run.
type Webhook struct {
	// ID is the provider's run id.
	ID string
	// Ref is the fleet's reference when the payload carries the run's metadata
	// (Parallel sends the whole task run, Gemini the interaction's user metadata); ""
	// otherwise (OpenAI sends the id only: poll it, Status.Ref has it).
	Ref string
	// State is the run's state the webhook announces.
	State State
	// Follows is the provider id of the run this one continues, when the payload
	// says so (Gemini's approved plan: the planning interaction, marked as Submit
	// marks it); "" otherwise.
	Follows string
}

// WebhookTolerance is how far a webhook's timestamp may be from now (Standard
// Webhooks' recommendation): an older delivery is refused as a possible replay.
const WebhookTolerance = 5 * time.Minute

var (
	errBadWebhook    = errors.New("the webhook is not a run event of this provider")
	errBadSignature  = errors.New("the webhook signature does not verify")
	errNoWebhooks    = errors.New("this provider sends no webhooks")
	errBadWebhookKey = errors.New("the webhook secret is not usable")
)

// VerifyWebhook checks a webhook of a kind that sends them (OpenAI, Gemini and
// Parallel, all Standard Webhooks: webhook-id, webhook-timestamp and
// webhook-signature "v1,<base64 HMAC-SHA256 of id.timestamp.body>", several
// space-separated during a secret rotation) against secret, and reads the run it is
// about. OpenAI's and Gemini's secrets are "whsec_" and the base64 key; Parallel's
// account secret is used as it is (its docs key the HMAC with the secret string).
func VerifyWebhook(kind, secret string, h http.Header, body []byte, now time.Time) (Webhook, error) {
	var key []byte
	switch kind {
	case KindOpenAI, KindGemini:
		k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if err != nil || len(k) == 0 {
			return Webhook{}, errBadWebhookKey
		}
		key = k
	case KindParallel:
		if secret == "" {
			return Webhook{}, errBadWebhookKey
		}
		key = []byte(secret)
	default:
		return Webhook{}, errNoWebhooks
	}
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if id == "" || err != nil {
		return Webhook{}, errBadSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > WebhookTolerance || d < -WebhookTolerance {
		return Webhook{}, errBadSignature
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	if !slices.ContainsFunc(strings.Fields(h.Get("webhook-signature")), func(s string) bool {
		sig, v1 := strings.CutPrefix(s, "v1,")
		got, err := base64.StdEncoding.DecodeString(sig)
		return v1 && err == nil && hmac.Equal(got, want)
	}) {
		return Webhook{}, errBadSignature
	}
	switch kind {
	case KindOpenAI:
		return parseEndEvent(body, "response.")
	case KindGemini:
		return parseEndEvent(body, "interaction.")
	}
	// Parallel's task_run.status event: {timestamp, type, data: <the Task Run>}.
	var ev struct {
		Type string      `json:"type"`
		Data parallelRun `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.Type != "task_run.status" || ev.Data.RunID == "" {
		return Webhook{}, errBadWebhook
	}
	return Webhook{ID: ev.Data.RunID, Ref: ev.Data.Metadata[metaRef], State: stateOf(ev.Data.Status)}, nil
}

// endStates are the states a run's end event announces, by its type's suffix.
var endStates = map[string]State{"completed": Completed, "incomplete": Completed, "requires_action": Completed,
	"failed": Failed, "cancelled": Cancelled}

// parseEndEvent reads a run's end event, {type: prefix and an ending (endStates),
// data: {id, user_metadata}}: OpenAI's response.* event for a background response
// (its data the id only) and Gemini's interaction.* event. A planning interaction's
// id comes back marked as Submit marks it, and an approval names the plan it follows.
func parseEndEvent(body []byte, prefix string) (Webhook, error) {
	var ev struct {
		Type string `json:"type"`
		Data struct {
			ID           string            `json:"id"`
			UserMetadata map[string]string `json:"user_metadata"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &ev) != nil || ev.Data.ID == "" {
		return Webhook{}, errBadWebhook
	}
	end, ok := strings.CutPrefix(ev.Type, prefix)
	st, known := endStates[end]
	if !ok || !known {
		return Webhook{}, errBadWebhook
	}
	w := Webhook{ID: ev.Data.ID, Ref: ev.Data.UserMetadata[metaRef], State: st, Follows: geminiFollows(ev.Data.UserMetadata)}
	if ev.Data.UserMetadata[metaPlan] == "true" {
		w.ID = geminiPlanMark + w.ID
	}
	return w, nil
}
