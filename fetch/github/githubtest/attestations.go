package githubtest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/klauspost/compress/snappy"
)

// attestation is one entry of GET /repos/{o}/{r}/attestations/{subject_digest}: GitHub answers
// each with the bundle inline, or (as it does today for most) bundle: null and a short-lived
// bundle_url on its storage host that serves the bundle snappy-compressed.
type attestation struct {
	id     int64
	bundle []byte
	viaURL bool
	url    string // a bundle_url of the test's choosing, on any host
}

// AddAttestation makes the attestations endpoint of owner/name answer for subject
// ("sha256:<hex>") with bundle: inline, or through bundle_url when viaURL.
func (s *Server) AddAttestation(owner, name, subject string, bundle []byte, viaURL bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attestations == nil {
		s.attestations = map[string][]*attestation{}
	}
	key := strings.ToLower(owner+"/"+name) + "@" + subject
	s.nextID++
	s.attestations[key] = append(s.attestations[key], &attestation{id: s.nextID, bundle: bundle, viaURL: viaURL})
}

// AddAttestationURL makes the attestations endpoint of owner/name answer for subject with an
// entry whose bundle_url is link, wherever it points: a hostile or misconfigured answer.
func (s *Server) AddAttestationURL(owner, name, subject, link string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attestations == nil {
		s.attestations = map[string][]*attestation{}
	}
	key := strings.ToLower(owner+"/"+name) + "@" + subject
	s.nextID++
	s.attestations[key] = append(s.attestations[key], &attestation{id: s.nextID, url: link})
}

// RemoveAttestations drops every attestation of subject, as a publisher deleting them would.
func (s *Server) RemoveAttestations(owner, name, subject string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.attestations, strings.ToLower(owner+"/"+name)+"@"+subject)
}

// serveAttestations answers GET /repos/{o}/{r}/attestations/{subject_digest} in GitHub's
// documented shape: 200 with {"attestations": [{bundle, repository_id, bundle_url}]}, or 404
// when the subject has none. Public repositories answer without a token.
func (s *Server) serveAttestations(w http.ResponseWriter, r *http.Request, rp *repo, subject string) {
	s.mu.Lock()
	list := s.attestations[strings.ToLower(rp.owner+"/"+rp.name)+"@"+subject]
	base := s.baseLocked(Storage)
	type entry struct {
		Bundle       json.RawMessage `json:"bundle"`
		RepositoryID int64           `json:"repository_id"`
		BundleURL    string          `json:"bundle_url,omitempty"`
		Initiator    string          `json:"initiator"`
	}
	var out []entry
	for _, a := range list {
		e := entry{Bundle: json.RawMessage("null"), RepositoryID: rp.repoID, Initiator: "user"}
		if a.url != "" {
			e.BundleURL = a.url
		} else if a.viaURL {
			sig := s.sign(a.id, "attestation", "0")
			e.BundleURL = base + "/attestations/" + strconv.FormatInt(a.id, 10) + ".json.sn?sig=" + sig
		} else {
			e.Bundle = a.bundle
		}
		out = append(out, e)
	}
	s.mu.Unlock()
	if len(out) == 0 {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	s.writeJSON(w, r, map[string]any{"attestations": out})
}

// serveAttestationBundle is the storage side of a bundle_url: the bundle, snappy-compressed.
func (s *Server) serveAttestationBundle(w http.ResponseWriter, r *http.Request, rest string) {
	idText := strings.TrimSuffix(rest, ".json.sn")
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil || r.URL.Query().Get("sig") != s.sign(id, "attestation", "0") {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	s.mu.Lock()
	var found *attestation
	for _, list := range s.attestations {
		for _, a := range list {
			if a.id == id {
				found = a
			}
		}
	}
	s.mu.Unlock()
	if found == nil {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(snappy.Encode(nil, found.bundle))
}
