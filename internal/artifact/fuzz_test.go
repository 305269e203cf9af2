package artifact

import (
	"bytes"
	"io"
	"testing"
)

func FuzzRead(f *testing.F) {
	f.Add(buildZip(f, manifestEntry(), entry{name: "capsule.wasm", data: coreWasm}))
	f.Add(buildZip(f, manifestEntry(), entry{name: "a.wasm", data: componentWasm}, entry{name: "../b", data: nil}))
	f.Add(buildZip(f, entry{name: "murmur.yaml", data: []byte("name: [x\n")}))
	f.Add([]byte("PK\x05\x06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if a != nil {
				t.Fatal("Read returned an archive with an error")
			}
			return
		}
		if a.Manifest.Name == "" || a.Manifest.Version == "" || a.PayloadName == "" {
			t.Fatalf("accepted an archive without name, version or payload: %+v", a)
		}
		rc, err := a.OpenPayload()
		if err != nil {
			return
		}
		io.Copy(io.Discard, rc)
		rc.Close()
	})
}
