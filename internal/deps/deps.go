package deps

import (
	_ "github.com/google/go-containerregistry/pkg/authn"
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "github.com/google/go-containerregistry/pkg/v1/empty"
	_ "github.com/google/go-containerregistry/pkg/v1/layout"
	_ "github.com/google/go-containerregistry/pkg/v1/mutate"
	_ "github.com/google/go-containerregistry/pkg/v1/remote"
	_ "github.com/google/go-containerregistry/pkg/v1/static"
	_ "github.com/klauspost/compress/flate"
	_ "github.com/klauspost/compress/zip"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/opencontainers/go-digest"
	_ "github.com/spf13/pflag"
	_ "github.com/tetratelabs/wazero"
	_ "github.com/tetratelabs/wazero/experimental/sys"
	_ "github.com/tetratelabs/wazero/experimental/sysfs"
	_ "github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/sys/unix"
	_ "golang.org/x/term"
)
