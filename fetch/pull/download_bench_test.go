package pull_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
)

// BenchmarkParallelHash128MiB compares the two ways to hash a blob fetched over four connections:
// following the bytes from its start as they come in, or reading the whole file once the last
// byte is in; with one stream beside them. On loopback (no cap) the transfer is CPU-bound and the
// hash's tail after the last byte shows; with each connection capped at 32 MiB/s the network is
// the bound, as on a real link.
func BenchmarkParallelHash128MiB(b *testing.B) {
	const size = 128 << 20
	reg := registrytest.Start(b)
	px := proxytest.Start(b, reg.Addr(), proxytest.Options{})
	st := pulltest.OpenStore(b, "oci://"+px.Addr()+"/murmur", ocistore.Options{})
	p := pulltest.PackSized(b, "grep", "1.0.0", size, 801)
	pulltest.Push(b, st, grep, "1.0.0", "any", p)
	for _, capped := range []struct {
		name string
		bps  int64
	}{{"loopback", 0}, {"32MiBps", 32 << 20}} {
		px.Set(proxytest.Options{PathContains: "/blobs/", BytesPerSecond: capped.bps})
		for _, mode := range []string{"follow", "last", "one-stream", "pieces-1"} {
			b.Run(capped.name+"/"+mode, func(b *testing.B) {
				b.SetBytes(int64(len(p.Zip)))
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					root := b.TempDir()
					s, err := cas.Open(filepath.Join(root, "cas"))
					if err != nil {
						b.Fatal(err)
					}
					proj := filepath.Join(root, "project")
					os.Mkdir(proj, 0o755)
					pl := &pull.Puller{CAS: s, Stores: []store.Store{st}, Platform: "linux-x86_64", Limits: pull.Limits{Jobs: 4}, Lock: pulltest.PinLock}
					piecesFirst(pl)
					switch mode {
					case "last":
						hashLast(pl)
					case "one-stream":
						pl.Limits.Connections = 1
					case "pieces-1":
						pl.Limits.Jobs = 1
					}
					b.StartTimer()
					if _, err := pl.Pull(context.Background(), pull.Project{Dir: proj}, []pull.Request{pulltest.Req(grep, "1.0.0")}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
