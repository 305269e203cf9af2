package fetch_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// The stores that are the project's own are those only its .murmur/config.yaml lists: one the
// home lists too is the home's.
func TestConfigSaysWhoseStoresTheyAre(t *testing.T) {
	home := filepath.Join(t.TempDir(), "config.yaml")
	proj := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(proj, ".murmur"), 0o755))
	must(t, os.WriteFile(home, []byte("stores: [oci://intranet.example/murmur, oci://shared.example/murmur]\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(proj, config.ProjectFile), []byte("stores: [oci://shared.example/murmur, oci://own.example/murmur]\n"), 0o644))
	c, err := config.Load(home, proj)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.ProjectStores) != 1 || !c.ProjectStores["oci://own.example/murmur"] {
		t.Fatalf("the project's own stores: %v, want only oci://own.example/murmur", c.ProjectStores)
	}
}

// Through the configuration and the command's Puller: a mirror only the cloned project names
// receives what the project's own store serves, and not what the home's oci-layout share serves
// without credentials; named in the home's config.yaml, the mirror is the home's and receives it.
func TestProjectMirrorGetsNothingTheHomesStoresServe(t *testing.T) {
	root := t.TempDir()
	proj := filepath.Join(root, "project")
	homeConfig := filepath.Join(root, "home", "config.yaml")
	share := "oci-layout:" + filepath.Join(root, "share")
	reg := registrytest.StartInProcess(t, nil)
	mirrorAddr := "oci://" + reg.Addr() + "/murmur"
	must(t, os.MkdirAll(filepath.Join(proj, ".murmur"), 0o755))
	must(t, os.MkdirAll(filepath.Dir(homeConfig), 0o755))
	must(t, os.WriteFile(filepath.Join(proj, config.ProjectFile), []byte("stores: [oci-layout:store]\nmirror: "+mirrorAddr+"\n"), 0o644))
	must(t, os.WriteFile(homeConfig, []byte("stores: ["+share+"]\n"), 0o644))
	sed := ref.Name{Scope: "acme", Name: "sed"}
	pulltest.Push(t, pulltest.OpenStore(t, share, ocistore.Options{}), grep, "1.0.0", "any", pulltest.Pack(t, "grep", "1.0.0", 81))
	pulltest.Push(t, pulltest.OpenStore(t, "oci-layout:"+filepath.Join(proj, "store"), ocistore.Options{}), sed, "1.0.0", "any", pulltest.Pack(t, "sed", "1.0.0", 82))
	store, err := cas.Open(filepath.Join(root, "home", "cas"))
	must(t, err)
	mirror := pulltest.OpenStore(t, mirrorAddr, ocistore.Options{})

	pullBoth := func() ([]pull.Result, []string) {
		t.Helper()
		ws, err := fetch.OpenProject(proj, homeConfig)
		must(t, err)
		var warned []string
		o := fetch.PullerOptions{CAS: store, Connections: 1, Platform: "linux-x86_64", Warn: func(s string) { warned = append(warned, s) }}
		pl, err := ws.Puller(o.OpenWith(func(addr string, plain bool) (fstore.Store, error) {
			return ocistore.Open(addr, ocistore.Options{PlainHTTP: plain})
		}, nil, nil))
		must(t, err)
		res, err := pl.Pull(context.Background(), ws.Project, []pull.Request{pulltest.Req(grep, "1.0.0"), pulltest.Req(sed, "1.0.0")})
		must(t, err)
		return res, warned
	}
	inMirror := func(n ref.Name) bool {
		_, err := mirror.Resolve(context.Background(), n, "1.0.0", "any")
		if err != nil && !errors.Is(err, errs.NotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	_, warned := pullBoth()
	if inMirror(grep) || !inMirror(sed) {
		t.Fatalf("the project's mirror holds acme/grep %v (from the home's share), acme/sed %v (from the project's store)", inMirror(grep), inMirror(sed))
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "acme/grep@1.0.0") {
		t.Fatalf("warned %q, want one line naming acme/grep", warned)
	}

	must(t, os.WriteFile(homeConfig, []byte("stores: ["+share+"]\nmirror: "+mirrorAddr+"\n"), 0o644))
	res, warned := pullBoth()
	if !inMirror(grep) || len(warned) != 0 || res[0].Mirror == nil || !res[0].Mirror.Pushed {
		t.Fatalf("the home's mirror: acme/grep in it %v, %+v, warned %q", inMirror(grep), res[0].Mirror, warned)
	}
}
