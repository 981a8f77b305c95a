package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
	"github.com/searchfleet/searchfleet/pkg/trace"
)

// step is one delivery's run of hop h of a job, as far as it can go without waiting:
// the job and chain as read with hop h's lease claimed, decoded once a phase needs
// them, and what the delivery says about itself.
type step struct {
	w  *Worker
	st *state.Step
	// v is the decoded chain: nil until a phase needs it, or nil with verr when the
	// stored request is unreadable.
	v    *view
	verr error
	h    int
	// last is set on the message's final delivery: failures then end the job instead
	// of retrying.
	last bool
	// known is the result the message being handled carries, already decoded.
	known *search.Done
}

// run reads the hop's facts, asks next what to do, and does it, until the step ends.
// Only its first round may call the model: a later round finds the answer stored.
func (s *step) run(ctx context.Context) error {
	w, job, h := s.w, s.st.Job, s.h
	trace.Step(ctx, job.ID, h)
	for again := false; ; again = true {
		a := next(s.facts())
		if s.v == nil && s.verr == nil && a.phase >= phaseBroken {
			// Only now is the chain decoded: the phases before need nothing of it, so a
			// result that does not complete its hop costs no decoding.
			s.decode()
			a = next(s.facts())
		}
		v := s.v
		if v != nil && v.unsaved != nil && a.act != actDispatch && a.act != actComplete {
			// The answer kept for its dispatch goes another way: stored now.
			if err := w.storeTurn(ctx, v, v.unsaved.hop, v.unsaved.b); err != nil {
				return err
			}
			continue
		}
		switch a.act {
		case actWait:
			return nil
		case actRetry:
			return bus.LeaseHeld(a.after, fmt.Errorf("hop %d of %s is being run by another worker", h, job.ID))
		case actReject:
			// The hop's dispatch record is missing: only possible if state expired.
			return bus.Permanent(fmt.Errorf("job %s hop %d: result for a hop that was never dispatched", job.ID, h-1))
		case actFail:
			return w.fail(ctx, job.ID, a.err)
		case actComplete:
			err := w.complete(ctx, v, h)
			if u := v.unsaved; err != nil && u != nil {
				// The completion failed before its ending was written: the answer,
				// paid for, is stored all the same, so the retry does not call the
				// model again.
				if serr := w.storeTurn(ctx, v, u.hop, u.b); serr != nil {
					w.Log.Warn("chat: storing a model answer", "job", job.ID, "hop", u.hop, "err", serr)
				}
			}
			return err
		case actDispatch:
			if err := w.dispatch(ctx, v, h); !errors.Is(err, errAnswerStood) {
				return err
			}
		case actCallModel:
			if again {
				return fmt.Errorf("hop %d of %s: the stored answer was not found", h, job.ID)
			}
			if answered, err := s.callModel(ctx); err != nil || !answered {
				return err
			}
		}
	}
}

// decode decodes the job's request and chain into the step's view.
func (s *step) decode() {
	if s.v, s.verr = newView(s.st.Job, s.st.Chain); s.v != nil {
		s.v.evidenceKey = s.w.EvidenceKey
		if s.known != nil {
			s.v.seed(s.known)
		}
	}
}

// facts reads what decides the hop's next action from the step: its view when decoded
// (before, the answer is not looked at).
func (s *step) facts() facts {
	st, v, h := s.st, s.v, s.h
	job := st.Job
	f := facts{hop: h, status: job.Status, badRequest: s.verr, claimed: st.Claimed, left: st.Left, model: job.Model, prevWant: -1}
	f.overdue = !job.Deadline.IsZero() && time.Now().After(job.Deadline)
	_, f.modelKnown = s.w.Models[job.Model]
	if hp, ok := st.Chain.Hops[h-1]; ok && h > 0 {
		f.prevWant, f.prevHave = hp.Expected, len(hp.Results)
	}
	if v == nil {
		return f
	}
	if hp, ok := v.chain.Hops[h]; ok && hp.Turn != nil {
		f.answered = true
		t, ok := v.turn(h)
		if f.garbled = !ok; !f.garbled {
			server, client := splitCalls(t, v.toolNames)
			f.server, f.client = len(server), len(client)
		}
	}
	return f
}

// storeTurn stores hop h's answer b (first write wins) and puts the stored answer in
// v; it prices the answer into the spend ledgers when it is b.
func (w *Worker) storeTurn(ctx context.Context, v *view, h int, b []byte) error {
	v.unsaved = nil
	// The answer is paid for: storing it is worth riding out a Redis restart (while
	// this worker keeps the hop's lease), or the redelivery would call the model again.
	var got json.RawMessage
	err := state.Persist(ctx, min(w.LeaseTTL/2, 15*time.Second), func() (err error) {
		got, err = w.Store.SaveTurn(ctx, v.job.ID, h, b, v.chain.Sticky, v.chain.GooglePreferred)
		return err
	})
	if err != nil {
		return err
	}
	w.turnStored(ctx, v, h, b, got)
	return nil
}

// turnStored puts got, hop h's stored answer, in v, b being the answer this worker
// got: another worker's answer, if it stored first, replaces it. Its own is priced
// into the spend ledgers now (once per hop; a crash before this leaves it to the
// completion's sweep, spend.go).
func (w *Worker) turnStored(ctx context.Context, v *view, h int, b, got []byte) {
	v.chain.Hop(h).Turn = got
	if !bytes.Equal(got, b) {
		delete(v.turns, h) // decoded from b, if at all
	}
	w.failpoint("chat.after_turn_stored")
	if bytes.Equal(got, b) {
		w.recordTurn(ctx, v, h)
	}
}
