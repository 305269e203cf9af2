package errs

// TokenDoc says what one token means to the person who reads `mur: <token>: …`, and what to do
// about it. `mur help tokens` prints these, and docs/tokens.md shows that output.
type TokenDoc struct {
	Token   Token
	Meaning string
}

// Docs lists every token, in the order of the constants. A test holds it to them, so that a new
// token can't reach a user undocumented.
var Docs = []TokenDoc{
	{Usage, "the command line can't be acted on: an unknown command or flag, a wrong argument, a REF " +
		"written as another tool writes it (the message says what mur reads instead), or an " +
		"environment variable with a bad value. Exit status 2, under every command."},
	{NotFound, "what was asked for is not there: an artifact or version in every store and source " +
		"asked, a file or folder named on the command line, an artifact mur info knows nothing of, a " +
		"pinned blob the CAS lacks (mur run exits 127). Where it can, the message names what does exist."},
	{Integrity, "bytes are not what they should be: a digest, a declared size, a zip entry's CRC-32, " +
		"or the name and version packed inside. Nothing of them is kept; a CAS blob that fails is " +
		"moved to cas/quarantine/."},
	{IndexMismatch, "a scope's murmur-index.json disagrees with its releases or with the scope asked " +
		"for (an asset or release it lists is missing, it names another scope), or mur index met one " +
		"name, version and platform with two hashes (among its files, or against --merge's index). " +
		"Its publisher must fix the index."},
	{OwnerChanged, "the GitHub owner or repository behind a scope is no longer the one murmur.lock " +
		"pinned by id, or config.yaml maps the scope to another repository. Nothing was fetched; run " +
		"'mur lock forget-scope SCOPE' only if the move is expected."},
	{LockConflict, "murmur.lock pins another version or digest than the one asked for or offered, or " +
		"a state store is in use by a run. Nothing was changed; 'mur pull --update REF' moves a pin."},
	{LockMismatch, "murmur.lock does not follow murmur.yaml (--locked, --frozen, mur lock --check). " +
		"Run 'mur lock' or 'mur pull', then commit murmur.lock."},
	{NotGranted, "--from asks for a place (stores, sources) that install.from in murmur.yaml does not " +
		"grant. Flags only narrow what murmur.yaml grants."},
	{Offline, "the network is off (--offline, --frozen or MUR_OFFLINE) and what was asked for is not " +
		"in the cache. Run 'mur warm' or 'mur pull' with the network first."},
	{RateLimited, "GitHub's API rate limit ran out. Set GITHUB_TOKEN, or retry at the time the " +
		"message gives."},
	{Network, "a store or source could not be reached, or failed: no such host, a refused, cut or " +
		"silent connection (MUR_NETWORK_TIMEOUT), TLS, or server errors that outlasted the retries."},
	{InvalidLock, "murmur.lock can't be read: not YAML, a lock_version other than 3, or an entry " +
		"that is malformed. Restore it from version control, or move it aside and pull."},
	{InvalidManifest, "a project's murmur.yaml can't be read: not YAML, no name, a bad version or " +
		"path, or an unknown key under capabilities (a grant mur can't read is refused, not guessed)."},
	{InvalidArtifact, "a .mur.zip, or the folder mur pack packs, is not a valid artifact: its zip, its " +
		"murmur.yaml (name, version, runtime) or its payload; or the payloads of one pull decompress to " +
		"more than it may stage (pull.max_decompressed). Under mur run, a payload that can't " +
		"execute (exit status 126)."},
	{InvalidConfig, "a config.yaml can't be read (a value of the wrong kind, a store address, a source, " +
		"a trusted_keys entry), or MURMUR_MAX_ARTIFACT_DECOMPRESSED_BYTES or " +
		"MURMUR_MAX_PULL_DECOMPRESSED_BYTES is not a positive number."},
	{InvalidBundle, "a bundle for mur cache import is damaged, truncated, holds something that " +
		"is not a blob, or holds a packed artifact whose entries are not what its zip records. " +
		"Nothing of the bad entry was admitted; export it again."},
	{Timeout, "a guest ran past its wall-time limit (limits.timeout_s or --timeout) and was stopped. " +
		"mur run exits 124."},
	{IO, "the local disk or file system failed: a read, write, rename or lock in the Murmur home, the " +
		"CAS or the project."},
	{Denied, "mur refused, or was refused: a symlink or special file where a project file or folder " +
		"should be, a registry or GitHub that refused the credentials, or credentials that would " +
		"travel over plain HTTP to another host. mur changed nothing."},
	{Interrupted, "Ctrl-C or SIGTERM stopped the command. What had finished stays pinned; what was " +
		"in flight changed nothing, and a download's bytes are kept to resume. Exit status 130."},
	{GuestCrashed, "the guest trapped (an unreachable, an out-of-bounds access; exit status 134), or " +
		"died having used its whole memory limit (limits.memory_mib)."},
	{Internal, "an error mur has no token for: a bug. Please report it with the message."},
	{ProvenanceMismatch, "a provenance bundle verifies but says something else: another owner or " +
		"repository id than murmur.lock pins, another artifact, predicate or signer workflow, or a " +
		"self-hosted runner. Nothing was pulled."},
	{ProvenanceMissing, "no provenance bundle where one is required: provenance: require, or a pin " +
		"whose verified provenance murmur.lock records (--provenance=off is refused for it)."},
	{ProvenanceUnverifiable, "a provenance bundle the trusted roots or keys can't check: an unknown " +
		"CA, no usable timestamp, a key no trusted_keys entry names, or mur-provenance missing."},
	{NoProvenance, "a warning, not an error: under provenance: prefer, an artifact had no provenance " +
		"bundle and was pulled on its digest alone; said once per scope per command. provenance: " +
		"off silences it, require makes it an error."},
}
