package sandbox

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/murmur-nexus/mur/internal/errs"
)

// overMemoryLimit is wazero's refusal of a module whose memory starts above the limit:
// "section memory: min 39 pages (2 Mi) over limit of 16 pages (1 Mi)".
var overMemoryLimit = regexp.MustCompile(`min (\d+) pages \([^)]*\) over limit of (\d+) pages`)

// memoryLimitError is the error of a compile that failed because the module's memory starts
// above limits.memory_mib, in the words of murmur.yaml: the limit, and the least that would do.
// It is nil for any other failure.
func memoryLimitError(err error) error {
	const pagesPerMiB = 16 // of 64 KiB
	m := overMemoryLimit.FindStringSubmatch(err.Error())
	if m == nil {
		if strings.Contains(err.Error(), "over limit of") {
			return &errs.Error{Token: errs.InvalidArtifact, Msg: fmt.Sprintf("the module needs more memory than the cap allows (%v); raise limits.memory_mib in murmur.yaml", err), Err: errors.Join(ErrNotExecutable, err)}
		}
		return nil
	}
	need, _ := strconv.ParseUint(m[1], 10, 32)
	limit, _ := strconv.ParseUint(m[2], 10, 32)
	needMiB := (need + pagesPerMiB - 1) / pagesPerMiB
	return &errs.Error{Token: errs.InvalidArtifact, Msg: fmt.Sprintf("the module needs %d MiB of memory to start (%d pages of 64 KiB), over its limit of %d MiB (limits.memory_mib: %d); raise limits.memory_mib in murmur.yaml to at least %d",
		needMiB, need, limit/pagesPerMiB, limit/pagesPerMiB, needMiB), Err: errors.Join(ErrNotExecutable, err)}
}
