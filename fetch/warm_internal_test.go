package fetch

import (
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

func TestPlatformsOrder(t *testing.T) {
	l := &lock.Lock{}
	for _, e := range []struct{ name, platform string }{
		{"acme/a", "linux-x86_64"}, {"acme/a", "darwin-aarch64"}, {"acme/a", "linux-aarch64"}, {"acme/b", ref.PlatformAny},
	} {
		if err := l.Upsert(e.name, "1.0.0", e.platform, strings.Repeat("ab", 32), "", false); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		want, host string
		out        []string
	}{
		// The host's pass comes last, so that tools/ ends up staged from the host's build.
		{"all", "darwin-aarch64", []string{"any", "linux-aarch64", "linux-x86_64", "darwin-aarch64"}},
		{"all", "linux-x86_64", []string{"any", "darwin-aarch64", "linux-aarch64", "linux-x86_64"}},
		{"", "linux-aarch64", []string{"linux-aarch64"}},
		{"darwin-aarch64", "linux-x86_64", []string{"darwin-aarch64"}},
	}
	for _, tt := range tests {
		if got := warmPlatforms(l, tt.want, tt.host); strings.Join(got, " ") != strings.Join(tt.out, " ") {
			t.Errorf("platforms(%q, host %s) = %v, want %v", tt.want, tt.host, got, tt.out)
		}
	}
}
