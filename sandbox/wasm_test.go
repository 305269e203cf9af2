package sandbox

import "encoding/binary"

// A minimal WebAssembly binary encoder, enough to hand-write the non-Go guests the tests need
// without external tools.

const (
	i32 = 0x7f
	i64 = 0x7e
)

func uleb(v uint64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			out = append(out, b|0x80)
			continue
		}
		return append(out, b)
	}
}

func sleb(v int64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && b&0x40 == 0) || (v == -1 && b&0x40 != 0) {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func vec(items ...[]byte) []byte { return cat(uleb(uint64(len(items))), cat(items...)) }

func wname(s string) []byte { return cat(uleb(uint64(len(s))), []byte(s)) }

func section(id byte, items ...[]byte) []byte {
	body := vec(items...)
	return cat([]byte{id}, uleb(uint64(len(body))), body)
}

func functype(params, results []byte) []byte {
	return cat([]byte{0x60}, uleb(uint64(len(params))), params, uleb(uint64(len(results))), results)
}

func importFunc(mod, name string, typeIdx uint64) []byte {
	return cat(wname(mod), wname(name), []byte{0x00}, uleb(typeIdx))
}

func i32c(v int64) []byte    { return cat([]byte{0x41}, sleb(v)) }
func i64c(v int64) []byte    { return cat([]byte{0x42}, sleb(v)) }
func call(idx uint64) []byte { return cat([]byte{0x10}, uleb(idx)) }

var (
	localGet0 = []byte{0x20, 0x00}
	localTee0 = []byte{0x22, 0x00}
	i32Add    = []byte{0x6a}
	i32Load   = []byte{0x28, 0x02, 0x00}
	drop      = []byte{0x1a}
	ifVoid    = []byte{0x04, 0x40}
	end       = []byte{0x0b}
)

func dataSegment(offset int64, b []byte) []byte {
	return cat([]byte{0x00}, i32c(offset), end, uleb(uint64(len(b))), b)
}

var header = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// openWriteModule is a wasi-libc-style guest: it opens path relative to the preopened directory
// dirfd with path_open (O_CREAT|O_TRUNC), writes content and exits 0. A failing path_open exits
// with 100+errno, a failing fd_write with 200+errno.
func openWriteModule(dirfd int64, path, content string) []byte {
	const (
		pathAt    = 16
		fdAt      = 1024
		iovAt     = 1040
		nwritAt   = 1056
		contentAt = 2048
	)
	iov := make([]byte, 8)
	binary.LittleEndian.PutUint32(iov, contentAt)
	binary.LittleEndian.PutUint32(iov[4:], uint32(len(content)))
	exitOnError := func(base int64) []byte {
		return cat(localTee0, ifVoid, localGet0, i32c(base), i32Add, call(3), end)
	}
	code := cat(
		i32c(dirfd), i32c(0), i32c(pathAt), i32c(int64(len(path))), i32c(1|8),
		i64c(0x1fffffff), i64c(0x1fffffff), i32c(0), i32c(fdAt), call(0),
		exitOnError(100),
		i32c(fdAt), i32Load, i32c(iovAt), i32c(1), i32c(nwritAt), call(1),
		exitOnError(200),
		i32c(fdAt), i32Load, call(2), drop,
		end,
	)
	body := cat(vec(cat(uleb(1), []byte{i32})), code)
	return cat(header,
		section(1,
			functype([]byte{i32, i32, i32, i32, i32, i64, i64, i32, i32}, []byte{i32}),
			functype([]byte{i32, i32, i32, i32}, []byte{i32}),
			functype([]byte{i32}, []byte{i32}),
			functype([]byte{i32}, nil),
			functype(nil, nil),
		),
		section(2,
			importFunc("wasi_snapshot_preview1", "path_open", 0),
			importFunc("wasi_snapshot_preview1", "fd_write", 1),
			importFunc("wasi_snapshot_preview1", "fd_close", 2),
			importFunc("wasi_snapshot_preview1", "proc_exit", 3),
		),
		section(3, uleb(4)),
		section(5, cat([]byte{0x00}, uleb(1))),
		section(7,
			cat(wname("memory"), []byte{0x02}, uleb(0)),
			cat(wname("_start"), []byte{0x00}, uleb(4)),
		),
		section(10, cat(uleb(uint64(len(body))), body)),
		section(11,
			dataSegment(pathAt, []byte(path)),
			dataSegment(iovAt, iov),
			dataSegment(contentAt, []byte(content)),
		),
	)
}

// emptyModule has an empty _start, memory of minPages pages (none when negative), and an
// import of mod.name when mod is not empty.
func emptyModule(minPages int64, mod, name string) []byte {
	var imports []byte
	startIdx := uint64(0)
	if mod != "" {
		imports = section(2, importFunc(mod, name, 0))
		startIdx = 1
	}
	var mem []byte
	if minPages >= 0 {
		mem = section(5, cat([]byte{0x00}, uleb(uint64(minPages))))
	}
	body := cat(vec(), end)
	return cat(header,
		section(1, functype(nil, nil)),
		imports,
		section(3, uleb(0)),
		mem,
		section(7, cat(wname("_start"), []byte{0x00}, uleb(startIdx))),
		section(10, cat(uleb(uint64(len(body))), body)),
	)
}

// trapModule's _start executes unreachable.
func trapModule() []byte {
	body := cat(vec(), []byte{0x00}, end)
	return cat(header,
		section(1, functype(nil, nil)),
		section(3, uleb(0)),
		section(7, cat(wname("_start"), []byte{0x00}, uleb(0))),
		section(10, cat(uleb(uint64(len(body))), body)),
	)
}
