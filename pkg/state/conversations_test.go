package state_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// The conversations aggregate behaves the same on Redis, as a cluster writes it, and
// over miniredis (which the ingress's unit tests use).
func TestConversations(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			conversationSuite(t, b.store(t).Conversations)
		})
	}
}

func item(id, text string) state.ConversationItem {
	return state.ConversationItem{ID: id, Item: json.RawMessage(fmt.Sprintf(`{"type":"message","id":%q,"role":"user","content":%q}`, id, text))}
}

func ids(items []state.ConversationItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

func conversationSuite(t *testing.T, s *state.Conversations) {
	ctx := context.Background()
	if _, err := s.GetConversation(ctx, "conv_none"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("a conversation never made: %v", err)
	}
	c := &state.Conversation{ID: "conv_a", Tenant: "t1", Metadata: map[string]string{"topic": "weather"}}
	if err := s.CreateConversation(ctx, c, []state.ConversationItem{item("msg_1", "one"), item("msg_2", "two")}); err != nil {
		t.Fatal(err)
	}
	if c.Items != 2 || c.Bytes <= 0 {
		t.Fatalf("created: %+v", c)
	}
	if err := s.CreateConversation(ctx, &state.Conversation{ID: "conv_a", Tenant: "t2"}, nil); !errors.Is(err, state.ErrExists) {
		t.Fatalf("creating it again: %v", err)
	}
	got, err := s.GetConversation(ctx, "conv_a")
	if err != nil || got.Tenant != "t1" || got.Metadata["topic"] != "weather" || got.Items != 2 || got.Bytes != c.Bytes || got.Created.IsZero() {
		t.Fatalf("GetConversation %+v %v", got, err)
	}

	// Items are added in order, each id once; a guard adds a response's turn once.
	n, bytes, err := s.AddConversationItems(ctx, "conv_a", "resp_1", []state.ConversationItem{item("msg_3", "three"), item("msg_1", "one again")})
	if err != nil || n != 3 || bytes <= c.Bytes {
		t.Fatalf("AddConversationItems: %d %d %v", n, bytes, err)
	}
	if n, _, err := s.AddConversationItems(ctx, "conv_a", "resp_1", []state.ConversationItem{item("msg_4", "four")}); err != nil || n != 3 {
		t.Fatalf("the same guard again: %d %v", n, err)
	}
	items, err := s.ConversationItems(ctx, "conv_a")
	if err != nil || fmt.Sprint(ids(items)) != "[msg_1 msg_2 msg_3]" {
		t.Fatalf("items %v %v", ids(items), err)
	}
	if it, err := s.ConversationItem(ctx, "conv_a", "msg_1"); err != nil || !json.Valid(it) || string(it) != string(item("msg_1", "one").Item) {
		t.Fatalf("item msg_1 %s %v (an id added twice keeps its first item)", it, err)
	}
	if _, _, err := s.AddConversationItems(ctx, "conv_none", "", []state.ConversationItem{item("msg_9", "x")}); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("adding to no conversation: %v", err)
	}

	// Deleting an item gives its bytes back.
	left, err := s.DeleteConversationItem(ctx, "conv_a", "msg_2")
	if err != nil || left >= bytes {
		t.Fatalf("DeleteConversationItem: %d %v", left, err)
	}
	if _, err := s.DeleteConversationItem(ctx, "conv_a", "msg_2"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("deleting it again: %v", err)
	}
	if _, err := s.ConversationItem(ctx, "conv_a", "msg_2"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("a deleted item: %v", err)
	}
	if items, _ := s.ConversationItems(ctx, "conv_a"); fmt.Sprint(ids(items)) != "[msg_1 msg_3]" {
		t.Fatalf("after the delete: %v", ids(items))
	}
	if got, _ := s.GetConversation(ctx, "conv_a"); got.Items != 2 || got.Bytes != left {
		t.Fatalf("the record after the delete: %+v, want %d bytes", got, left)
	}

	// Metadata is replaced whole.
	if err := s.SetConversationMetadata(ctx, "conv_a", map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetConversation(ctx, "conv_a"); fmt.Sprint(got.Metadata) != "map[k:v]" {
		t.Fatalf("metadata %v", got.Metadata)
	}
	if err := s.SetConversationMetadata(ctx, "conv_none", nil); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("metadata of no conversation: %v", err)
	}

	// The bound: a write that would pass it adds nothing.
	many := make([]state.ConversationItem, state.MaxConversationItems-1)
	for i := range many {
		many[i] = item(fmt.Sprintf("msg_m%d", i), "m")
	}
	if _, _, err := s.AddConversationItems(ctx, "conv_a", "", many); !errors.Is(err, state.ErrConversationFull) {
		t.Fatalf("past the bound: %v", err)
	}
	if got, _ := s.GetConversation(ctx, "conv_a"); got.Items != 2 {
		t.Fatalf("a refused write added items: %+v", got)
	}

	if err := s.DeleteConversation(ctx, "conv_a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetConversation(ctx, "conv_a"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("a deleted conversation: %v", err)
	}
	if items, err := s.ConversationItems(ctx, "conv_a"); err != nil || len(items) != 0 {
		t.Fatalf("a deleted conversation's items: %v %v", ids(items), err)
	}
}
