package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// StoredResponse is what the fleet keeps of a Responses request made with store
// (the default), beside its job: the conversation it ran on, so previous_response_id
// and item_reference can name it later, and the settings its answers repeat. The
// answer itself is the job's. It lives as long as the job record (Retention), and
// moves to the archive with it (ArchiveJob).
type StoredResponse struct {
	Tenant string `json:"tenant"`
	// Input is the request's input items, with those of the responses before it
	// (previous_response_id) resolved into it.
	Input json.RawMessage `json:"input"`
	// Echo is the request's settings the response object repeats, by field.
	Echo map[string]json.RawMessage `json:"echo,omitempty"`
	// Prior is how many of Input's items came before the request's own input (the
	// responses previous_response_id continues, or its conversation's items).
	Prior int `json:"prior,omitempty"`
	// Conversation is the conversation the response continues and adds its input
	// and output to ("" none).
	Conversation string `json:"conversation,omitempty"`
}

// SaveResponse records the stored response of job id for the retention period.
func (s *Jobs) SaveResponse(ctx context.Context, id string, r *StoredResponse) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = s.r.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, s.K.StoredResponse(id), b, s.Retention)
		if r.Conversation != "" {
			// Beside the response, which the archive moves: the finisher reads it for
			// every stored response that ends (ResponseConversation).
			p.Set(ctx, s.K.responseConversation(id), r.Conversation, s.Retention)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("state: recording response %s: %w", id, err)
	}
	return nil
}

// ResponseConversation is the conversation the stored response of job id adds its
// turn to ("" none).
func (s *Jobs) ResponseConversation(ctx context.Context, id string) (string, error) {
	v, err := s.r.Get(ctx, s.K.responseConversation(id)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("state: reading response %s: %w", id, err)
	}
	return v, nil
}

// GetResponse reads the stored response of job id (from Redis while its job is hot,
// from the job's archived record once it has ended); ErrNotFound when there is none
// (never stored, or expired with its job).
func (s *Jobs) GetResponse(ctx context.Context, id string) (*StoredResponse, error) {
	b, err := s.r.Get(ctx, s.K.StoredResponse(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		// Deleted (DeleteResponse), or archived with its job.
		if n, err := s.r.Exists(ctx, s.K.deletedResponse(id)).Result(); err != nil {
			return nil, fmt.Errorf("state: reading response %s: %w", id, err)
		} else if n > 0 {
			return nil, ErrNotFound
		}
		rec, err := s.archived(ctx, id, false)
		if err != nil {
			return nil, err
		}
		if rec == nil || len(rec.Response) == 0 {
			return nil, ErrNotFound
		}
		b = rec.Response
	} else if err != nil {
		return nil, fmt.Errorf("state: reading response %s: %w", id, err)
	}
	var r StoredResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("state: reading response %s: %w", id, err)
	}
	return &r, nil
}

// DeleteResponse deletes the stored response of job id: from then on GetResponse
// finds none, whether Redis or the archive holds it (a mark, kept for the retention
// period, says it was deleted). The job itself keeps its record for its retention.
func (s *Jobs) DeleteResponse(ctx context.Context, id string) error {
	_, err := s.r.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, s.K.deletedResponse(id), "1", s.Retention)
		p.Del(ctx, s.K.StoredResponse(id), s.K.responseConversation(id))
		return nil
	})
	if err != nil {
		return fmt.Errorf("state: deleting response %s: %w", id, err)
	}
	return nil
}
