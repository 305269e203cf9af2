package provenance

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/murmur-nexus/mur/internal/errs"
)

// KeyPair is what WriteKeyPair wrote: NAME.key, NAME.pub and the key's hint.
type KeyPair struct {
	Private string `json:"private_key"`
	Public  string `json:"public_key"`
	Hint    string `json:"hint"`
	Type    string `json:"type"`
}

// WriteKeyPair makes a key pair of kind and writes it as name.key (PKCS#8 PEM, mode 0600) and
// name.pub (PKIX PEM). It never overwrites: a file already at either name is refused before
// anything is written, and one that appears meanwhile still is (each file is linked into place,
// which fails on an existing name). Nothing is left behind when either write fails.
func WriteKeyPair(name, kind string) (KeyPair, error) {
	if kind == "" {
		kind = KeyP256
	}
	kp := KeyPair{Private: name + ".key", Public: name + ".pub", Type: kind}
	for _, p := range []string{kp.Private, kp.Public} {
		if _, err := os.Lstat(p); err == nil {
			return kp, errs.New(errs.Usage, "%s already exists, and mur key generate never overwrites a key; choose another NAME, or move the old pair aside first", p)
		}
	}
	priv, pub, hint, err := GenerateKey(kind)
	if err != nil {
		return kp, errs.Wrap(err, errs.Usage, "%v", err)
	}
	kp.Hint = hint
	return kp, writePair(kp, priv, pub)
}

// writePair writes the private key, then the public one, and takes the private key back when the
// public one can't be written: a lone NAME.key would block the next mur key generate NAME, and
// whoever finds it could not tell which public key goes with it.
func writePair(kp KeyPair, priv, pub []byte) error {
	if err := writeNew(kp.Private, priv, 0o600); err != nil {
		return err
	}
	if err := writeNew(kp.Public, pub, 0o644); err != nil {
		os.Remove(kp.Private)
		return err
	}
	return nil
}

// writeNew writes data to a temporary file beside path, syncs it and links it to path, so that
// path holds either nothing or all of data, and an existing path is never replaced.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return errs.Wrap(err, errs.IO, "can't write %s: %v", path, errs.OSCause(err))
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp, path)
	}
	switch {
	case errors.Is(err, fs.ErrExist):
		return errs.Wrap(err, errs.Usage, "%s already exists, and mur key generate never overwrites a key; choose another NAME", path)
	case err != nil:
		return errs.Wrap(err, errs.IO, "can't write %s: %v", path, errs.OSCause(err))
	}
	return nil
}
