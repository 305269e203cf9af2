package stage

import (
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// What one pull may stage. Each payload is held to the decompression ceiling on its own
// (MURMUR_MAX_ARTIFACT_DECOMPRESSED_BYTES), but a project of many small downloads that each
// decompress to near it would fill tools/ with gigabytes from kilobytes: four 16 KB zstd
// artifacts once staged 1.9 GB. So the payloads one pull stages are bounded together as well.

// DefaultMaxPullDecompressed is what the payloads one pull stages into tools/ may decompress to
// together, unless config.yaml's pull.max_decompressed or MURMUR_MAX_PULL_DECOMPRESSED_BYTES
// says otherwise: twice the ceiling of one artifact.
const DefaultMaxPullDecompressed = 1 << 30

// EnvMaxPullDecompressed names the environment variable that overrides the bound, over what
// config.yaml says.
const EnvMaxPullDecompressed = "MURMUR_MAX_PULL_DECOMPRESSED_BYTES"

// MaxPullDecompressed is the bound in force: MURMUR_MAX_PULL_DECOMPRESSED_BYTES when it is set,
// else configured when positive (config.yaml's pull.max_decompressed), else the default.
func MaxPullDecompressed(configured int64) (int64, error) {
	v := strings.TrimSpace(os.Getenv(EnvMaxPullDecompressed))
	switch {
	case v == "" && configured > 0:
		return configured, nil
	case v == "":
		return DefaultMaxPullDecompressed, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, errs.New(errs.InvalidConfig, "%s is %q; expected a positive number of bytes such as %d, or unset it for config.yaml's pull.max_decompressed (%d bytes by default)", EnvMaxPullDecompressed, v, int64(DefaultMaxPullDecompressed), int64(DefaultMaxPullDecompressed))
	}
	return n, nil
}

// Budget is what one pull may still stage: a folder staged from the blob reserves its payload's
// size before a byte of it is written, a stream takes its share as it writes (charged), and
// either gives it back only if it is discarded. A nil Budget bounds nothing.
type Budget struct {
	limit int64
	mu    sync.Mutex
	used  int64
}

// NewBudget is a budget of limit bytes.
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// reserve takes size bytes for the payload of name, or refuses them, saying why and what to do.
func (b *Budget) reserve(name ref.Name, size int64) error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if size > b.limit-b.used {
		return errs.New(errs.InvalidArtifact, "the payload of %s decompresses to %s, and with the %s this pull has staged already that is over the %s one pull may stage (pull.max_decompressed in config.yaml, or %s); nothing of it was staged. If the artifacts are genuine, raise that bound, or pull them a few at a time",
			name, cas.FormatSize(size), cas.FormatSize(b.used), cas.FormatSize(b.limit), EnvMaxPullDecompressed)
	}
	b.used += size
	return nil
}

// release gives back n bytes a discarded folder had reserved.
func (b *Budget) release(n int64) {
	if b != nil && n > 0 {
		b.mu.Lock()
		b.used -= n
		b.mu.Unlock()
	}
}

// take reserves n bytes if there is room for them, with no words: for a stream's charged writer.
func (b *Budget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.limit-b.used {
		return false
	}
	b.used += n
	return true
}

// charged passes writes on to w once b has room for them, and counts what it took: a stream
// that decompresses a payload as it downloads stops once the pull may stage no more, instead of
// filling the disk first; its folder takes over what it counted, or it gives it back.
type charged struct {
	w io.Writer
	b *Budget
	n int64
}

var errNoRoom = errors.New("over what the pull may stage")

func (c *charged) Write(p []byte) (int, error) {
	if !c.b.take(int64(len(p))) {
		return 0, errNoRoom
	}
	c.n += int64(len(p))
	return c.w.Write(p)
}

// handOver returns what c counted and counts nothing more: the folder it was written for holds
// it now.
func (c *charged) handOver() int64 {
	if c == nil {
		return 0
	}
	n := c.n
	c.n = 0
	return n
}
