package wire

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// A Responses client that asks for include ["reasoning.encrypted_content"] gets each
// reasoning model's state in a reasoning item's encrypted_content, sealed by the
// fleet, and sends it back on a later stateless (store false) turn, which restores it:
// a Responses model's own reasoning item (its encrypted content), Claude's thinking
// and redacted thinking with their signatures, a Gemini thought signature, a Chat
// model's reasoning_content. The seal is authenticated encryption (AES-256-GCM) of
// the canonical Reasoning under a key every ingress of the fleet shares
// (FLEET_REASONING_SECRET), bound to the tenant (the tenant is the additional data):
// a client can read none of it, alter none of it, and cannot open another tenant's
// seal as its own.

// sealPrefix starts every seal the fleet writes (format 1).
const sealPrefix = "sfr1."

// sealedReasoning is the Protocol of a reasoning part read from a client's request
// before it is opened (Request.OpenReasoning): no model takes it.
const sealedReasoning Protocol = "searchfleet.sealed"

// Sealer seals reasoning state for a tenant, and opens what it (or a fleet process
// with the same secret) sealed.
type Sealer struct {
	aeads []cipher.AEAD // the first seals; each opens
}

// NewSealer returns a sealer keyed by secrets: the first seals, every one opens (a
// secret being retired stays listed until the seals it made have aged out). Each
// secret is at least 32 characters.
func NewSealer(secrets ...string) (*Sealer, error) {
	if len(secrets) == 0 {
		return nil, errors.New("a reasoning seal needs a secret")
	}
	s := &Sealer{}
	for _, secret := range secrets {
		if len(secret) < 32 {
			return nil, errors.New("a reasoning seal secret must be at least 32 characters")
		}
		key, err := hkdf.Key(sha256.New, []byte(secret), nil, "searchfleet reasoning seal 1", 32)
		if err != nil {
			return nil, err
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		s.aeads = append(s.aeads, aead)
	}
	return s, nil
}

// sealData is the additional data of a tenant's seals.
func sealData(tenant string) []byte { return []byte("searchfleet reasoning\x00" + tenant) }

// Seal returns r sealed for tenant.
func (s *Sealer) Seal(tenant string, r *Reasoning) string {
	plain, _ := json.Marshal(r)
	a := s.aeads[0]
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(plain)+a.Overhead())
	rand.Read(nonce)
	return sealPrefix + base64.RawURLEncoding.EncodeToString(a.Seal(nonce, nonce, plain, sealData(tenant)))
}

// Open returns the reasoning sealed for tenant (false: not a seal of this fleet's for
// tenant, or altered).
func (s *Sealer) Open(tenant, sealed string) (*Reasoning, bool) {
	enc, ok := strings.CutPrefix(sealed, sealPrefix)
	if !ok || s == nil {
		return nil, false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil, false
	}
	for _, a := range s.aeads {
		if len(b) < a.NonceSize()+a.Overhead() {
			return nil, false
		}
		plain, err := a.Open(nil, b[:a.NonceSize()], b[a.NonceSize():], sealData(tenant))
		if err != nil {
			continue
		}
		var r Reasoning
		if json.Unmarshal(plain, &r) != nil || r.Protocol == "" || r.Protocol == sealedReasoning {
			return nil, false
		}
		return &r, true
	}
	return nil, false
}

// OpenReasoning restores the reasoning state of the sealed reasoning items of r (its
// Responses input) as the model's own, opened for tenant. An item whose seal does
// not open (altered, another tenant's, another fleet's) is refused as OpenAI refuses
// encrypted content it cannot verify.
func (r *Request) OpenReasoning(s *Sealer, tenant string) *Error {
	for i := range r.Messages {
		for j := range r.Messages[i].Parts {
			p := &r.Messages[i].Parts[j]
			if p.Kind != PartReasoning || p.Reasoning == nil || p.Reasoning.Protocol != sealedReasoning {
				continue
			}
			rs, ok := s.Open(tenant, p.Reasoning.Encrypted)
			if !ok {
				return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_encrypted_content", Param: "input",
					Message: fmt.Sprintf("The encrypted content for item %s could not be verified. Reason: Encrypted content could not be decrypted or parsed.", Clip(p.Reasoning.ID, 64))}
			}
			p.Reasoning = rs
		}
	}
	return nil
}

// SealReasoning lets r's Responses encoding give each reasoning part's state, sealed
// for tenant, as its item's encrypted_content, when req asked for it (include
// reasoning.encrypted_content). An answer with no reasoning state says so in a note.
func (r *Response) SealReasoning(req *Request, s *Sealer, tenant string) {
	if req == nil || !req.EncryptedReasoning || s == nil {
		return
	}
	r.Seal = func(rs *Reasoning) string { return s.Seal(tenant, rs) }
	if r.Status != StatusCompleted {
		return
	}
	if !slices.ContainsFunc(r.Content, func(p Part) bool { return p.Kind == PartReasoning && p.Reasoning != nil }) {
		r.Notes = append(r.Notes, "reasoning.encrypted_content is empty: the model gave no reasoning state for this answer")
	}
}

// SealedPart is the part of a reasoning input item whose encrypted_content is one of
// the fleet's seals, to be opened (ok false: it is not).
func SealedPart(id, encrypted string) (Part, bool) {
	if !strings.HasPrefix(encrypted, sealPrefix) {
		return Part{}, false
	}
	return Part{Kind: PartReasoning, Reasoning: &Reasoning{Protocol: sealedReasoning, ID: id, Encrypted: encrypted}}, true
}
