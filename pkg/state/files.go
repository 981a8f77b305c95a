package state

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// File is an uploaded or produced file's metadata (the Keys.File hash); its bytes
// live elsewhere (pkg/batch keeps them in an object store under the same id).
type File struct {
	ID       string
	Tenant   string
	Filename string
	Purpose  string
	Bytes    int64
	Created  time.Time
}

// SaveFile records a file's metadata and its place in its tenant's list. Saving an id
// again replaces it.
func (s *Store) SaveFile(ctx context.Context, f *File) error {
	_, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.K.File(f.ID), "id", f.ID, "tenant", f.Tenant, "filename", f.Filename, "purpose", f.Purpose,
			"bytes", f.Bytes, "created", Millis(f.Created))
		p.ZAdd(ctx, s.K.TenantFiles(f.Tenant), redis.Z{Score: float64(f.Created.UnixMilli()), Member: f.ID})
		return nil
	})
	if err != nil {
		return fmt.Errorf("state: recording file %s: %w", f.ID, err)
	}
	return nil
}

// GetFile reads a file's metadata; ErrNotFound when there is none.
func (s *Store) GetFile(ctx context.Context, id string) (*File, error) {
	m, err := s.r.HGetAll(ctx, s.K.File(id)).Result()
	if err != nil {
		return nil, fmt.Errorf("state: reading file %s: %w", id, err)
	}
	if m["id"] == "" {
		return nil, ErrNotFound
	}
	n, _ := strconv.ParseInt(m["bytes"], 10, 64)
	return &File{ID: m["id"], Tenant: m["tenant"], Filename: m["filename"], Purpose: m["purpose"], Bytes: n, Created: FromMillis(m["created"])}, nil
}

// DeleteFile removes a file's metadata and its place in its tenant's list.
func (s *Store) DeleteFile(ctx context.Context, f *File) error {
	_, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.K.File(f.ID))
		p.ZRem(ctx, s.K.TenantFiles(f.Tenant), f.ID)
		return nil
	})
	if err != nil {
		return fmt.Errorf("state: deleting file %s: %w", f.ID, err)
	}
	return nil
}
