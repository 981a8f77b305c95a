package state

import "encoding/json"

// DecodeArchived reads an archived record as the store's readers do: each hash as
// they see it, and the stored response.
func DecodeArchived(b []byte) (job, chain, searches map[string]string, response []byte, err error) {
	var rec coldRecord
	err = json.Unmarshal(b, &rec)
	return rec.Job, rec.Chain, rec.Searches, rec.Response, err
}

// SplitJob splits a job hash into the record's fields, the chain's and the recorded
// results, and names the fields that are not the record's.
var SplitJob = splitJob

// AsCluster makes s write as it does across a Redis Cluster's slots (no script
// touches keys of two slots), on the single Redis the tests run against.
func AsCluster(s *Store) *Store { s.c.inOrder = false; return s }

// ScriptSource is the text the store loads for the script at path (lua/<name>.lua).
var ScriptSource = scriptSource
