package ref

import (
	"errors"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
)

func TestParseName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 100)
	tests := []struct {
		in      string
		want    Name
		wantErr string // substring of the message; "" means success
	}{
		{"acme/grep", Name{"acme", "grep"}, ""},
		{"a/b", Name{"a", "b"}, ""},
		{"my-org/tool-2", Name{"my-org", "tool-2"}, ""},
		{"0/9", Name{"0", "9"}, ""},
		{long + "/" + long, Name{long, long}, ""},
		{"grep", Name{}, "write it as <scope>/grep"},
		{"", Name{}, "not of the form"},
		{"/grep", Name{}, "scope must be 1 to 100"},
		{"acme/", Name{}, "name must be 1 to 100"},
		{long + "a/grep", Name{}, "found 101"},
		{"acme/" + long + "a", Name{}, "found 101"},
		{"-acme/grep", Name{}, "start or end"},
		{"acme-/grep", Name{}, "start or end"},
		{"acme/grep-", Name{}, "start or end"},
		{"acme/gr_ep", Name{}, "found '_'"},
		{"acme/grep/x", Name{}, "found '/'"},
		{"Acme/grep", Name{}, "names are lowercase: write acme/grep"},
		{"ACME", Name{}, "not of the form"},
		{"acme/gr ep", Name{}, "found ' '"},
		{"acme/grép", Name{}, "may hold only"},
	}
	for _, tt := range tests {
		got, err := ParseName(tt.in)
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("ParseName(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			if got.String() != tt.in {
				t.Errorf("ParseName(%q).String() = %q", tt.in, got.String())
			}
			continue
		}
		if err == nil {
			t.Errorf("ParseName(%q) = %v; want an error containing %q", tt.in, got, tt.wantErr)
			continue
		}
		if !errors.Is(err, errs.Usage) || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseName(%q) error = %v; want usage error containing %q", tt.in, err, tt.wantErr)
		}
	}
}

func TestValidateSegment(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "a-b", "abc123", strings.Repeat("z", 100)} {
		if err := ValidateSegment(ok); err != nil {
			t.Errorf("ValidateSegment(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-a", "a-", "A", "a.b", "a/b", strings.Repeat("z", 101)} {
		if err := ValidateSegment(bad); !errors.Is(err, errs.Usage) {
			t.Errorf("ValidateSegment(%q) = %v; want usage error", bad, err)
		}
	}
}

func TestValidateVersion(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"1", "1.2.0", "v1.2.0", "1.0.0-rc.1+build.5", "2024_01_01", "A", strings.Repeat("9", 128), "latest1", "_x", "+x"} {
		if err := ValidateVersion(ok); err != nil {
			t.Errorf("ValidateVersion(%q) = %v", ok, err)
		}
	}
	tests := []struct{ in, want string }{
		{"", "1 to 128"},
		{strings.Repeat("9", 129), "1 to 128"},
		{".1", "must not start"},
		{"-1", "must not start"},
		{"1 0", "may hold only"},
		{"1/0", "may hold only"},
		{"1@0", "may hold only"},
		{"latest", "reserved"},
		{"LATEST", "reserved"},
		{"Stable", "reserved"},
		{"edge", "reserved"},
	}
	for _, tt := range tests {
		err := ValidateVersion(tt.in)
		if !errors.Is(err, errs.Usage) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ValidateVersion(%q) = %v; want usage error containing %q", tt.in, err, tt.want)
		}
	}
}

func TestIsReservedVersion(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{"latest": true, "Latest": true, "STABLE": true, "edge": true, "1.0": false, "latest-1": false, "": false} {
		if got := IsReservedVersion(v); got != want {
			t.Errorf("IsReservedVersion(%q) = %v", v, got)
		}
	}
}

func TestPlatforms(t *testing.T) {
	t.Parallel()
	for _, p := range append([]string{PlatformAny}, KnownPlatforms...) {
		if err := ValidatePlatform(p); err != nil {
			t.Errorf("ValidatePlatform(%q) = %v", p, err)
		}
	}
	for _, p := range []string{"", "linux-amd64", "Linux-x86_64", "windows-x86_64", "ANY"} {
		if err := ValidatePlatform(p); !errors.Is(err, errs.Usage) {
			t.Errorf("ValidatePlatform(%q) = %v; want usage error", p, err)
		}
	}
	if err := ValidatePlatform(HostPlatform()); err != nil {
		t.Errorf("HostPlatform() = %q is not valid: %v", HostPlatform(), err)
	}
}

func TestParseRef(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    Ref
		wantErr string
	}{
		{"acme/grep@1.2.0", Ref{Name: Name{"acme", "grep"}, Version: "1.2.0"}, ""},
		{"acme/grep", Ref{Name: Name{"acme", "grep"}, Version: Latest}, ""},
		{"acme/grep@latest", Ref{Name: Name{"acme", "grep"}, Version: Latest}, ""},
		{"acme/grep@LaTeSt", Ref{Name: Name{"acme", "grep"}, Version: Latest}, ""},
		{"acme/grep@1.0.0+build", Ref{Name: Name{"acme", "grep"}, Version: "1.0.0+build"}, ""},
		{"dist/grep-1.2.0.mur.zip", Ref{Name: Name{Scope: ScopeLocal}, Path: "dist/grep-1.2.0.mur.zip"}, ""},
		{"/abs/x.mur.zip", Ref{Name: Name{Scope: ScopeLocal}, Path: "/abs/x.mur.zip"}, ""},
		{"acme/grep@", Ref{}, "1 to 128"},
		{"acme/grep@stable", Ref{}, "reserved"},
		{"acme/grep@1 0", Ref{}, "may hold only"},
		{"acme/grep@1@2", Ref{}, "may hold only"},
		{"grep@1.0", Ref{}, "write it as <scope>/grep"},
		{"dist/grep.zip", Ref{}, "may hold only"},
	}
	for _, tt := range tests {
		got, err := ParseRef(tt.in)
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("ParseRef(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
				continue
			}
			again, err := ParseRef(got.String())
			if err != nil || again != got {
				t.Errorf("ParseRef(%q).String() = %q does not round-trip: %+v, %v", tt.in, got.String(), again, err)
			}
			if got.IsFile() != (tt.want.Path != "") {
				t.Errorf("ParseRef(%q).IsFile() = %v", tt.in, got.IsFile())
			}
			continue
		}
		if !errors.Is(err, errs.Usage) || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseRef(%q) = %+v, %v; want usage error containing %q", tt.in, got, err, tt.wantErr)
		}
	}
}

func TestParseDigest(t *testing.T) {
	t.Parallel()
	hex := strings.Repeat("ab", 32)
	d, err := ParseDigest("sha256:" + hex)
	if err != nil || d.Encoded() != hex {
		t.Fatalf("ParseDigest = %v, %v", d, err)
	}
	if d2, err := DigestFromHex(hex); err != nil || d2 != d {
		t.Fatalf("DigestFromHex = %v, %v", d2, err)
	}
	for _, bad := range []string{
		"", hex, "sha256:" + strings.ToUpper(hex), "sha256:" + hex[:63], "sha256:" + hex + "a",
		"sha512:" + strings.Repeat("ab", 64), "md5:" + strings.Repeat("a", 32), "sha256:" + strings.Repeat("g", 64),
	} {
		if _, err := ParseDigest(bad); !errors.Is(err, errs.Usage) {
			t.Errorf("ParseDigest(%q) = %v; want usage error", bad, err)
		}
	}
	if _, err := DigestFromHex("xyz"); err == nil {
		t.Error("DigestFromHex(xyz) succeeded")
	}
}

// The OCI spelling, which crane, oras and docker take, is accepted for mur's own.
func TestNormalizePlatform(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"linux/arm64": "linux-aarch64", "linux/arm64/v8": "linux-aarch64", "linux/amd64": "linux-x86_64",
		"darwin/arm64": "darwin-aarch64", "linux-amd64": "linux-x86_64", "linux-aarch64": "linux-aarch64",
		"any": "any", "windows/amd64": "windows/amd64", "linux/riscv64": "linux/riscv64", "bogus": "bogus",
	} {
		if got := NormalizePlatform(in); got != want {
			t.Errorf("NormalizePlatform(%q) = %q, want %q", in, got, want)
		}
	}
}
