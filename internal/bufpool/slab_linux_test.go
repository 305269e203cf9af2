package bufpool

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// Slab memory is eligible for transparent huge pages wherever the system offers them on request.
func TestSlabAsksForHugePages(t *testing.T) {
	t.Parallel()
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("transparent huge pages are off here (%q)", mode)
	}
	b := Get(1 << 20)
	defer Put(b)
	(*b)[0] = 1
	addr := uintptr(unsafe.Pointer(&(*b)[0]))
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) > 0 && !strings.HasSuffix(fields[0], ":") { // a mapping's first line
			var lo, hi uintptr
			fmt.Sscanf(fields[0], "%x-%x", &lo, &hi)
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "THPeligible:") {
			if strings.TrimSpace(strings.TrimPrefix(line, "THPeligible:")) != "1" {
				t.Fatalf("the slab holding a 1 MiB buffer is not eligible for huge pages: %s", line)
			}
			return
		}
	}
	t.Fatalf("no THPeligible line for the slab at %#x in /proc/self/smaps", addr)
}
