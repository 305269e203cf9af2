package main

import "testing"

func TestRegistryRefs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		arg, ref, store string
		ok              bool
	}{
		{"registry.example:5000/murmur/acme/upper:1.0", "acme/upper@1.0", "oci://registry.example:5000/murmur", true},
		{"oci://registry.example/a/b/acme/upper@1.0", "acme/upper@1.0", "oci://registry.example/a/b", true},
		{"localhost/murmur/acme/upper", "acme/upper", "oci://localhost/murmur", true},
		{"registry.example/acme/upper:latest", "acme/upper", "", true},
		{"registry.example/murmur/acme/upper@sha256:" + hex64, "acme/upper@VERSION", "oci://registry.example/murmur", true},
		{"acme/upper:1.0", "", "", false},         // docker's name:tag, no host
		{"acme/upper@1.0", "", "", false},         // mur's own form
		{"./dist/x.mur.zip", "", "", false},       // a file
		{"registry.example/upper", "", "", false}, // no scope/name after the host
		{"registry.example/Acme/Upper:1", "", "", false},
	} {
		r, ok := parseRegistryRef(tc.arg)
		st, _ := r.store()
		if ok != tc.ok || (ok && (r.ref() != tc.ref || st != tc.store)) {
			t.Errorf("parseRegistryRef(%q) = %q, %q, %v; want %q, %q, %v", tc.arg, r.ref(), st, ok, tc.ref, tc.store, tc.ok)
		}
	}
}

func TestDigestPins(t *testing.T) {
	t.Parallel()
	if n, d, ok := digestPin("acme/upper@sha256:" + hex64); !ok || n != "acme/upper" || d != "sha256:"+hex64 {
		t.Errorf("digestPin = %q %q %v", n, d, ok)
	}
	for _, arg := range []string{"acme/upper@1.0", "acme/upper", "acme/upper@md5:00", "Acme@sha256:" + hex64} {
		if _, _, ok := digestPin(arg); ok {
			t.Errorf("digestPin(%q) took it for a digest pin", arg)
		}
	}
	if refHint("pull", "acme/upper@1.0") != "" || refHint("pull", "acme/upper") != "" {
		t.Error("refHint has a hint for a reference mur takes")
	}
}

const hex64 = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
