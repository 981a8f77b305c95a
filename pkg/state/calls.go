package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// What the search and fetch workers keep of a job's calls lives in the job's hash
// (Keys.Job), as its chain does: one script reads it with the job's status, one
// stores an outcome with its recorded result, and it needs no TTL of its own. The
// fields:
//
//	o:<hop>:<call>     a direct search's stored outcome (Done JSON); a chain's call
//	                   stores its outcome as its result (r:<hop>:<call>, see
//	                   SaveSearchResult)
//	i:<hop>:<call>     the place of a call's result among its hop's, in the order
//	                   they were stored (the last completes the hop)
//	fe:<hop>:<call>    the engine now running the call (after a fallback)
//	ft:<hop>:<call>    the failed attempts so far (JSON)
//	s:<addr>           a recorded result by content address (first write wins)
const (
	prefixOutcome        = "o"
	prefixFallbackEngine = "fe"
	prefixFallbackTried  = "ft"
	prefixRecorded       = "s"
	prefixPlace          = "i"
)

func callField(prefix string, h int, call string) string {
	return prefix + ":" + strconv.Itoa(h) + ":" + call
}

func recordedField(addr string) string { return prefixRecorded + ":" + addr }

// fieldKind names what a job hash field holds.
type fieldKind int

const (
	recordField    fieldKind = iota // the job record's own
	chainField                      // the chain's (archived with the record)
	searchField                     // a recorded result (archived with the record)
	callStateField                  // a call's outcome or fallback state (dropped at archiving)
)

func kindOf(f string) fieldKind {
	if strings.HasPrefix(f, ledgerMark) {
		return callStateField // the job's spend ledger: not archived (the usage keeps its cost)
	}
	if isChainField(f) {
		return chainField
	}
	kind, _, ok := strings.Cut(f, ":")
	if !ok {
		return recordField
	}
	switch kind {
	case prefixRecorded:
		return searchField
	case prefixOutcome, prefixFallbackEngine, prefixFallbackTried, prefixPlace:
		return callStateField
	}
	return recordField
}

// splitJob splits a job hash into the record's fields, the chain's, the recorded
// results (by address) and the names of every field that is not the record's.
func splitJob(m map[string]string) (job, chain, searches map[string]string, others []string) {
	job, chain, searches = make(map[string]string, len(m)), map[string]string{}, map[string]string{}
	for k, v := range m {
		switch kindOf(k) {
		case recordField:
			job[k] = v
			continue
		case chainField:
			chain[k] = v
		case searchField:
			searches[strings.TrimPrefix(k, prefixRecorded+":")] = v
		}
		others = append(others, k)
	}
	return job, chain, searches, others
}

// saveOutcome stores a call's outcome and records a result under its address (the
// first recorded stays), each when given, in a job that is there and not archived (no
// hash is made without its TTL). (lua/save_outcome.lua)
var saveOutcome = script("save_outcome")

// Recording is a result to record under a job's content address (see RecordSearch)
// with its call's outcome (SaveSearchDone).
type Recording struct {
	Addr   string
	Result []byte
}

// SaveSearchDone stores a direct search's outcome b for a call, and with rec, records
// rec's result under its address among the job's (and its batch's) recorded results,
// in one round trip: the script that writes both, and the batch's record beside it.
// A job that is gone or archived gets nothing stored.
func (s *Searches) SaveSearchDone(ctx context.Context, id string, h int, call string, b []byte, rec *Recording) error {
	if err := s.save(ctx, id, callField(prefixOutcome, h, call), b, [2]string{}, rec); err != nil {
		return fmt.Errorf("state: storing a search's outcome: %w", err)
	}
	return nil
}

// SaveSearchResult stores the outcome b of a chain's call as the chain's result of
// that call, as SaveSearchDone stores a direct search's: the first one stored stays,
// counted among its hop's results with its place (RecordAndLoad, reading it, writes
// nothing), and every later StartSearch returns it.
func (s *Searches) SaveSearchResult(ctx context.Context, id string, h int, call string, b []byte, rec *Recording) error {
	counted := [2]string{hopField(prefixCount, h), callField(prefixPlace, h, call)}
	if err := s.save(ctx, id, resultField(h, call), b, counted, rec); err != nil {
		return fmt.Errorf("state: storing a search's result: %w", err)
	}
	return nil
}

// RecordSearch records a complete search result of a job under its content address,
// and under its batch's when the job belongs to one, each kept for the retention (the
// job's with its record).
func (s *Searches) RecordSearch(ctx context.Context, jobID, addr string, result []byte) error {
	if err := s.save(ctx, jobID, "", nil, [2]string{}, &Recording{Addr: addr, Result: result}); err != nil {
		return fmt.Errorf("state: recording a search: %w", err)
	}
	return nil
}

// save runs saveOutcome; counted are its count and place fields (empty: none).
func (s *core) save(ctx context.Context, id, outcomeField string, outcome []byte, counted [2]string, rec *Recording) error {
	batch, recField, result := "", "", []byte(nil)
	if rec != nil {
		recField, result = recordedField(rec.Addr), rec.Result
		var err error
		batch, err = s.r.HGet(ctx, s.K.Job(id), "batch").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
	}
	return s.pipelined(ctx, func(p redis.Pipeliner) {
		saveOutcome.EvalSha(ctx, p, []string{s.K.Job(id)}, outcomeField, outcome, recField, result, counted[0], counted[1])
		if batch != "" {
			k := s.K.batchSearchRecord(batch)
			p.HSetNX(ctx, k, rec.Addr, result)
			p.PExpire(ctx, k, s.Retention)
		}
	})
}

// RecordedSearches returns all of a job's recorded results by content address (none
// for a job that recorded none, or whose record expired): from Redis while the job
// is hot, from its archived record once it has ended.
func (s *Searches) RecordedSearches(ctx context.Context, jobID string) (map[string][]byte, error) {
	m, err := s.r.HGetAll(ctx, s.K.Job(jobID)).Result()
	if err != nil {
		return nil, fmt.Errorf("state: reading recorded searches: %w", err)
	}
	_, _, found, _ := splitJob(m)
	if len(found) == 0 {
		rec, err := s.archived(ctx, jobID, false)
		if err != nil {
			return nil, err
		}
		if rec != nil {
			found = rec.Searches
		}
	}
	out := make(map[string][]byte, len(found))
	for k, v := range found {
		out[k] = []byte(v)
	}
	return out, nil
}

// RecordedSearch looks each of addrs up among a job's recorded results, then among
// its batch's (batchID "" for none), in one round trip. It returns the results found
// by address; inBatch names those found only in the batch's.
func (s *Searches) RecordedSearch(ctx context.Context, jobID, batchID string, addrs []string) (found map[string][]byte, inBatch map[string]bool, err error) {
	if len(addrs) == 0 {
		return nil, nil, nil
	}
	fields := make([]string, len(addrs))
	for i, a := range addrs {
		fields[i] = recordedField(a)
	}
	var cmds []*redis.SliceCmd
	_, err = s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		cmds = append(cmds, p.HMGet(ctx, s.K.Job(jobID), fields...))
		if batchID != "" {
			cmds = append(cmds, p.HMGet(ctx, s.K.batchSearchRecord(batchID), addrs...))
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("state: reading recorded searches: %w", err)
	}
	found, inBatch = map[string][]byte{}, map[string]bool{}
	for i, c := range cmds {
		for j, v := range c.Val() {
			str, ok := v.(string)
			if !ok || found[addrs[j]] != nil {
				continue
			}
			found[addrs[j]] = []byte(str)
			inBatch[addrs[j]] = i > 0
		}
	}
	return found, inBatch, nil
}
