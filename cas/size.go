package cas

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/murmur-nexus/mur/internal/errs"
)

// ParseSize reads a size such as 20GiB, 512M, 1.5G or 1000000 (bytes): a positive number with an
// optional unit K, M, G or T, each 1024 times the one before, spelled with or without B or iB,
// in any case.
func ParseSize(v string) (int64, error) {
	t := strings.TrimSpace(v)
	num := strings.TrimRightFunc(t, func(r rune) bool { return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' })
	unit := strings.ToLower(strings.TrimSpace(t[len(num):]))
	num = strings.TrimSpace(num)
	shift := map[string]uint{"": 0, "b": 0, "k": 10, "kb": 10, "kib": 10, "m": 20, "mb": 20, "mib": 20, "g": 30, "gb": 30, "gib": 30, "t": 40, "tb": 40, "tib": 40}
	sh, ok := shift[unit]
	f, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || num == "" || strings.ContainsAny(num, "eExXpP_") {
		return 0, errs.New(errs.Usage, "%q is not a size; write a number of bytes with an optional unit, such as 20GiB, 512M or 1000000", v)
	}
	bytes := f * float64(uint64(1)<<sh)
	if !(bytes >= 1) || bytes > float64(1<<62) {
		return 0, errs.New(errs.Usage, "%q is not a size mur can use; give at least 1 byte and at most 4 EiB, such as 20GiB", v)
	}
	return int64(bytes), nil
}

// FormatSize writes n bytes the way people read cache sizes: 1.5 GiB, 812.0 KiB, 40 B.
func FormatSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// FormatAge writes a duration the way the duration flags take it: whole days as 30d, since a
// cache is kept for days and 720h0m0s reads as a puzzle; anything else as Go writes it.
func FormatAge(d time.Duration) string {
	const day = 24 * time.Hour
	if d > 0 && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	return d.String()
}
