package state

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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
	// Expires is when the file is deleted (zero: never). Its metadata key expires
	// then; the file's bytes go with the next sweep (ExpiredFiles).
	Expires time.Time
}

// SaveFile records a file's metadata, its place in its tenant's list and its size in
// its tenant's usage (FileUsage), and when it expires. Saving an id again replaces it.
func (s *Files) SaveFile(ctx context.Context, f *File) error {
	_, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.K.File(f.ID), "id", f.ID, "tenant", f.Tenant, "filename", f.Filename, "purpose", f.Purpose,
			"bytes", f.Bytes, "created", Millis(f.Created), "expires", Millis(f.Expires))
		p.ZAdd(ctx, s.K.TenantFiles(f.Tenant), redis.Z{Score: float64(f.Created.UnixMilli()), Member: f.ID})
		p.HSet(ctx, s.K.tenantFileBytes(f.Tenant), f.ID, f.Bytes)
		if !f.Expires.IsZero() {
			p.PExpireAt(ctx, s.K.File(f.ID), f.Expires)
			p.ZAdd(ctx, s.K.fileExpiries(), redis.Z{Score: float64(f.Expires.UnixMilli()), Member: f.ID + "/" + f.Tenant})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("state: recording file %s: %w", f.ID, err)
	}
	return nil
}

// GetFile reads a file's metadata; ErrNotFound when there is none.
func (s *Files) GetFile(ctx context.Context, id string) (*File, error) {
	m, err := s.r.HGetAll(ctx, s.K.File(id)).Result()
	if err != nil {
		return nil, fmt.Errorf("state: reading file %s: %w", id, err)
	}
	if m["id"] == "" {
		return nil, ErrNotFound
	}
	n, _ := strconv.ParseInt(m["bytes"], 10, 64)
	return &File{ID: m["id"], Tenant: m["tenant"], Filename: m["filename"], Purpose: m["purpose"], Bytes: n, Created: FromMillis(m["created"]),
		Expires: FromMillis(m["expires"])}, nil
}

// DeleteFile removes a file's metadata and its place in its tenant's list.
func (s *Files) DeleteFile(ctx context.Context, f *File) error {
	_, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.K.File(f.ID))
		p.ZRem(ctx, s.K.TenantFiles(f.Tenant), f.ID)
		p.HDel(ctx, s.K.tenantFileBytes(f.Tenant), f.ID)
		p.ZRem(ctx, s.K.fileExpiries(), f.ID+"/"+f.Tenant)
		return nil
	})
	if err != nil {
		return fmt.Errorf("state: deleting file %s: %w", f.ID, err)
	}
	return nil
}

// FileUsage is what tenant's files take: how many and their bytes (files past their
// expiry count until the sweep deletes them).
func (s *Files) FileUsage(ctx context.Context, tenant string) (files int, bytes int64, err error) {
	sizes, err := s.r.HVals(ctx, s.K.tenantFileBytes(tenant)).Result()
	if err != nil {
		return 0, 0, fmt.Errorf("state: reading file usage: %w", err)
	}
	for _, v := range sizes {
		n, _ := strconv.ParseInt(v, 10, 64)
		bytes += n
	}
	return len(sizes), bytes, nil
}

// ExpiredFiles returns up to limit files past their expiry (id and tenant only), for
// the sweep that deletes their bytes and then their records (DeleteFile).
func (s *Files) ExpiredFiles(ctx context.Context, limit int) ([]*File, error) {
	members, err := s.r.ZRangeByScore(ctx, s.K.fileExpiries(), &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(time.Now().UnixMilli(), 10), Count: int64(limit)}).Result()
	if err != nil {
		return nil, fmt.Errorf("state: listing expired files: %w", err)
	}
	out := make([]*File, 0, len(members))
	for _, m := range members {
		id, tenant, _ := strings.Cut(m, "/")
		out = append(out, &File{ID: id, Tenant: tenant})
	}
	return out, nil
}
