package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/internal/ref"
)

func keyCmd() *command {
	return &command{name: "key", short: "make the key pair that signs a team's artifacts",
		examples: `mur key generate release
mur key generate release --scope acme`,
		subs: []*command{keyGenerateCmd()}}
}

func keyGenerateCmd() *command {
	var kind, scope string
	return &command{
		name:  "generate",
		args:  "NAME",
		short: "write NAME.key and NAME.pub, and print the config.yaml lines that trust them",
		long: `Writes a new key pair: NAME.key, the private key (unencrypted PKCS#8 PEM, mode 0600; keep
it secret, and sign with 'mur push --sign-key NAME.key'), and NAME.pub, its public key (PEM),
for the machines that pull. Prints the trusted_keys lines to add to each consumer's
$MURMUR_HOME/config.yaml, under --scope when given (else for every scope). An existing NAME.key
or NAME.pub is never overwritten.

The default type, ecdsa-p256, is the one cosign also reads ('cosign verify-blob --key NAME.pub').
--type ed25519 makes an Ed25519 pair; mur signs with it as Ed25519ph, which cosign can't verify.`,
		examples: `mur key generate release
mur key generate release --scope acme
mur key generate nightly --type ed25519`,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&kind, "type", provenance.KeyP256, "the key type: ecdsa-p256 (cosign reads its bundles) or ed25519")
			fs.StringVar(&scope, "scope", "", "print the trusted_keys lines under scopes.SCOPE instead of for every scope")
		},
		run: func(e *env, args []string) error {
			if len(args) != 1 {
				return usagef("mur key generate takes one NAME, found %d arguments; e.g. 'mur key generate team' writes team.key and team.pub", len(args))
			}
			name := strings.TrimSuffix(strings.TrimSuffix(args[0], ".key"), ".pub")
			if kind != provenance.KeyP256 && kind != provenance.KeyEd25519 {
				return usagef("--type must be %s or %s, found %q", provenance.KeyP256, provenance.KeyEd25519, kind)
			}
			if scope != "" {
				if err := ref.ValidateSegment(scope); err != nil {
					return usagef("--scope %q is not a scope: %v", scope, err)
				}
			}
			kp, err := provenance.WriteKeyPair(name, kind)
			if err != nil {
				return err
			}
			pubPath, err := filepath.Abs(kp.Public)
			if err != nil {
				pubPath = kp.Public
			}
			var scopes []string
			if scope != "" {
				scopes = []string{scope}
			}
			snippet := trustYAML(scopes, pubPath, "", kp.Hint)
			if e.g.json {
				return e.JSON(struct {
					provenance.KeyPair
					ConfigYAML string `json:"config_yaml"`
				}{kp, snippet})
			}
			label := "ECDSA P-256"
			if kind == provenance.KeyEd25519 {
				label = "Ed25519"
			}
			fmt.Fprintf(e.stdout, "# wrote %s (the %s private key, mode 0600: keep it secret; sign with mur push --sign-key %s)\n", kp.Private, label, kp.Private)
			fmt.Fprintf(e.stdout, "# and %s (its public key, hint %s).\n", kp.Public, kp.Hint)
			if kind == provenance.KeyEd25519 {
				fmt.Fprintln(e.stdout, "# cosign can't verify mur's Ed25519 bundles; make an ecdsa-p256 pair for cosign.")
			}
			fmt.Fprintf(e.stdout, "# To trust it, add these lines to $MURMUR_HOME/config.yaml on each machine that pulls,\n# with %s copied there (or paste the key inline as pem: |):\n", filepath.Base(kp.Public))
			fmt.Fprint(e.stdout, snippet)
			return nil
		},
	}
}

// trustYAML is the config.yaml text that trusts a key: under scopes.SCOPE for each of scopes,
// else for every scope; the key as pem_file when pemFile is set, else inline.
func trustYAML(scopes []string, pemFile, pemText, hint string) string {
	var entry strings.Builder
	if pemFile != "" {
		fmt.Fprintf(&entry, "  - pem_file: %s\n    hint: %s\n", yamlScalar(pemFile), hint)
	} else {
		fmt.Fprintf(&entry, "  - hint: %s\n    pem: |\n", hint)
		for _, line := range strings.Split(strings.TrimRight(pemText, "\n"), "\n") {
			fmt.Fprintf(&entry, "      %s\n", line)
		}
	}
	if len(scopes) == 0 {
		return "trusted_keys:\n" + entry.String()
	}
	var b strings.Builder
	b.WriteString("scopes:\n")
	for _, scope := range scopes {
		fmt.Fprintf(&b, "  %s:\n    trusted_keys:\n", scope)
		for _, line := range strings.SplitAfter(strings.TrimRight(entry.String(), "\n"), "\n") {
			b.WriteString("    " + strings.TrimRight(line, "\n") + "\n")
		}
	}
	return b.String()
}

// yamlScalar quotes a path that YAML would otherwise read as something else.
func yamlScalar(s string) string {
	if strings.ContainsAny(s, ":#'\"{}[],&*!|>%@` \t") || strings.HasPrefix(s, "-") || strings.HasPrefix(s, "?") {
		return "'" + strings.ReplaceAll(s, "'", "''") + "'"
	}
	return s
}

// siblingPublicKey is NAME.pub beside a NAME.key, when it is the key that hint names; ""
// otherwise (push then prints the public key inline).
func siblingPublicKey(keyPath string, hint string) string {
	if !strings.HasSuffix(keyPath, ".key") {
		return ""
	}
	pub := strings.TrimSuffix(keyPath, ".key") + ".pub"
	data, err := readKeyFile(pub)
	if err != nil {
		return ""
	}
	if _, err := provenance.KeyHint(data, hint); err != nil { // another key's .pub, or no key
		return ""
	}
	if abs, err := filepath.Abs(pub); err == nil {
		return abs
	}
	return pub
}

// readKeyFile reads a key file named on the command line: a regular file, symlinked or not (so
// that a mistyped path to a FIFO or a device does not hang or flood), of the size a key has.
func readKeyFile(path string) ([]byte, error) {
	const max = 64 << 10
	st, err := os.Stat(path)
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe):
		return nil, pe.Err
	case err != nil:
		return nil, err
	case st.IsDir():
		return nil, errors.New("it is a folder, where a key file was expected")
	case !st.Mode().IsRegular():
		return nil, errors.New("it is not a regular file")
	case st.Size() > max:
		return nil, fmt.Errorf("it is over %d bytes, far more than a key holds", max)
	}
	data, err := os.ReadFile(path)
	if errors.As(err, &pe) {
		return nil, pe.Err
	}
	return data, err
}
