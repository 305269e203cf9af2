package sandbox

import "testing"

// growModule has one page of memory and a _start that grows it by delta pages with memory.grow,
// trapping when the grow fails.
func growModule(delta int64) []byte {
	body := cat(vec(),
		[]byte{0x41}, sleb(delta), // i32.const delta
		[]byte{0x40, 0x00},     // memory.grow 0
		[]byte{0x41}, sleb(-1), // i32.const -1
		[]byte{0x46},       // i32.eq
		[]byte{0x04, 0x40}, // if
		[]byte{0x00},       // unreachable
		end,                // end if
		end)
	return cat(header,
		section(1, functype(nil, nil)),
		section(3, uleb(0)),
		section(5, cat([]byte{0x00}, uleb(1))),
		section(7, cat(wname("_start"), []byte{0x00}, uleb(0))),
		section(10, cat(uleb(uint64(len(body))), body)),
	)
}

// The memory cap is exact: a guest grows to its last page of limits.memory_mib and no further
// (issue 22, item 14). A cap even one page too generous fails here; growing near the cap, not far
// past it, is what tells.
func TestMemoryCapIsExactToThePage(t *testing.T) {
	t.Parallel()
	r := sharedRunner(t)
	const capMiB = 8
	pages := int64(capMiB * 16)
	if res := run(t, r, growModule(pages-1), Config{Args: []string{"g"}, MemoryMiB: capMiB}); res.err != nil || res.code != 0 {
		t.Fatalf("growing to exactly %d MiB under a %d MiB cap: %d, %v", capMiB, capMiB, res.code, res.err)
	}
	if res := run(t, r, growModule(pages), Config{Args: []string{"g"}, MemoryMiB: capMiB}); res.err == nil && res.code == 0 {
		t.Fatalf("growing one page past a %d MiB cap succeeded", capMiB)
	}
	if res := run(t, r, emptyModule(pages, "", ""), Config{Args: []string{"g"}, MemoryMiB: capMiB}); res.err != nil || res.code != 0 {
		t.Fatalf("a module that starts at exactly its cap: %d, %v", res.code, res.err)
	}
	if res := run(t, r, emptyModule(pages+1, "", ""), Config{Args: []string{"g"}, MemoryMiB: capMiB}); res.err == nil && res.code == 0 {
		t.Fatal("a module that starts one page over its cap ran")
	}
}
