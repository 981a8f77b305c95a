package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A conversation (the Conversations API, id prefix conv_) is a tenant's list of
// Responses items in the order they were added: by the client, and by each stored
// response that names it (its input and its output, once it completes). It is three
// keys in one hash slot ({id}): its record, its items by id and their order. Every
// write keeps all three for the retention period from then, as a job record is kept
// from its end.

// MaxConversationItems bounds the items one conversation holds.
const MaxConversationItems = 2000

// ErrConversationFull means the items do not fit in the conversation
// (MaxConversationItems).
var ErrConversationFull = errors.New("state: the conversation is full")

// conversation is a conversation's record.
type Conversation struct {
	ID       string
	Tenant   string
	Created  time.Time
	Metadata map[string]string
	// Items is how many items it holds; Bytes what they take.
	Items int
	Bytes int64
}

// ConversationItem is one item of a conversation: its id and the item as JSON (with
// that id).
type ConversationItem struct {
	ID   string
	Item json.RawMessage
}

// addConversationItems adds items to a conversation, creating it first in create
// mode. (lua/add_conversation_items.lua)
var addConversationItems = script("add_conversation_items")

// deleteConversationItem deletes one item of a conversation.
// (lua/delete_conversation_item.lua)
var deleteConversationItem = script("delete_conversation_item")

func (s *Conversations) keys(id string) []string {
	return []string{s.K.conversation(id), s.K.conversationItems(id), s.K.conversationOrder(id)}
}

// add runs addConversationItems; it returns the conversation's items and bytes after.
func (s *Conversations) add(ctx context.Context, mode string, c *Conversation, guard string, metadata map[string]string, items []ConversationItem) (int, int64, error) {
	md := ""
	if metadata != nil {
		b, err := json.Marshal(metadata)
		if err != nil {
			return 0, 0, err
		}
		md = string(b)
	}
	argv := make([]any, 0, 8+2*len(items))
	argv = append(argv, mode, s.Retention.Milliseconds(), MaxConversationItems, guard, md, c.Tenant, Millis(c.Created), c.ID)
	for _, it := range items {
		argv = append(argv, it.ID, []byte(it.Item))
	}
	v, err := addConversationItems.Run(ctx, s.r, s.keys(c.ID), argv...).Int64Slice()
	if err != nil || len(v) != 3 {
		return 0, 0, fmt.Errorf("state: writing conversation %s: %w", c.ID, err)
	}
	switch v[0] {
	case 0:
		return 0, 0, ErrNotFound
	case -1:
		return 0, 0, ErrExists
	case -2:
		return int(v[1]), v[2], ErrConversationFull
	}
	return int(v[1]), v[2], nil
}

// CreateConversation records a new conversation with its first items (each with its
// id) and metadata; ErrExists if the id is taken.
func (s *Conversations) CreateConversation(ctx context.Context, c *Conversation, items []ConversationItem) error {
	if c.Created.IsZero() {
		c.Created = time.Now().UTC()
	}
	md := c.Metadata
	if md == nil {
		md = map[string]string{}
	}
	n, bytes, err := s.add(ctx, "create", c, "", md, items)
	c.Items, c.Bytes = n, bytes
	return err
}

// AddConversationItems adds items at the end of conversation id, in order; an item
// whose id it holds already is not added again. With a guard ("" none: a response's
// id), they are added only the first time that guard is given. It returns the
// conversation's items and bytes after; ErrNotFound when there is no conversation,
// ErrConversationFull when the items do not fit (nothing is added).
func (s *Conversations) AddConversationItems(ctx context.Context, id, guard string, items []ConversationItem) (int, int64, error) {
	if guard != "" {
		guard = "r:" + guard
	}
	return s.add(ctx, "add", &Conversation{ID: id}, guard, nil, items)
}

// SetConversationMetadata replaces a conversation's metadata; ErrNotFound when there
// is none.
func (s *Conversations) SetConversationMetadata(ctx context.Context, id string, metadata map[string]string) error {
	if metadata == nil {
		metadata = map[string]string{}
	}
	_, _, err := s.add(ctx, "add", &Conversation{ID: id}, "", metadata, nil)
	return err
}

// GetConversation reads a conversation's record; ErrNotFound when there is none (or
// it expired).
func (s *Conversations) GetConversation(ctx context.Context, id string) (*Conversation, error) {
	m, err := s.r.HMGet(ctx, s.K.conversation(id), "id", "tenant", "created", "metadata", "n", "bytes").Result()
	if err != nil {
		return nil, fmt.Errorf("state: reading conversation %s: %w", id, err)
	}
	str := func(i int) string { v, _ := m[i].(string); return v }
	if str(0) == "" {
		return nil, ErrNotFound
	}
	c := &Conversation{ID: str(0), Tenant: str(1), Created: FromMillis(str(2)), Metadata: map[string]string{}}
	json.Unmarshal([]byte(str(3)), &c.Metadata)
	c.Items, _ = strconv.Atoi(str(4))
	c.Bytes, _ = strconv.ParseInt(str(5), 10, 64)
	return c, nil
}

// ConversationItems reads a conversation's items, in the order they were added
// (none for a conversation that does not exist).
func (s *Conversations) ConversationItems(ctx context.Context, id string) ([]ConversationItem, error) {
	ids, err := s.r.ZRange(ctx, s.K.conversationOrder(id), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("state: reading conversation %s: %w", id, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	vals, err := s.r.HMGet(ctx, s.K.conversationItems(id), ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("state: reading conversation %s: %w", id, err)
	}
	out := make([]ConversationItem, 0, len(ids))
	for i, v := range vals {
		if v, ok := v.(string); ok { // an item deleted between the two reads is gone
			out = append(out, ConversationItem{ID: ids[i], Item: json.RawMessage(v)})
		}
	}
	return out, nil
}

// ConversationItem reads one item of a conversation; ErrNotFound when it has none
// of that id.
func (s *Conversations) ConversationItem(ctx context.Context, id, itemID string) (json.RawMessage, error) {
	b, err := s.r.HGet(ctx, s.K.conversationItems(id), itemID).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("state: reading conversation %s: %w", id, err)
	}
	return b, nil
}

// DeleteConversationItem deletes one item of a conversation and returns the bytes
// its items take after; ErrNotFound when it has no item of that id (or there is no
// conversation).
func (s *Conversations) DeleteConversationItem(ctx context.Context, id, itemID string) (int64, error) {
	v, err := deleteConversationItem.Run(ctx, s.r, s.keys(id), itemID, s.Retention.Milliseconds()).Int64Slice()
	if err != nil || len(v) != 3 {
		return 0, fmt.Errorf("state: deleting an item of conversation %s: %w", id, err)
	}
	if v[0] != 1 {
		return v[2], ErrNotFound
	}
	return v[2], nil
}

// DeleteConversation deletes a conversation and its items.
func (s *Conversations) DeleteConversation(ctx context.Context, id string) error {
	if err := s.r.Del(ctx, s.keys(id)...).Err(); err != nil {
		return fmt.Errorf("state: deleting conversation %s: %w", id, err)
	}
	return nil
}

// ConversationRetention is how long a conversation is kept after its last write.
func (s *Conversations) ConversationRetention() time.Duration { return s.Retention }
