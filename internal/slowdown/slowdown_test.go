package slowdown

import (
	"testing"
	"time"
)

func TestScale(t *testing.T) {
	for _, c := range []struct {
		env  string
		want time.Duration
	}{{"", time.Second}, {"4", 4 * time.Second}, {"2.5", 2500 * time.Millisecond}, {"0.5", time.Second}, {"fast", time.Second}} {
		t.Setenv(Env, c.env)
		if got := Scale(time.Second); got != c.want {
			t.Errorf("%s=%q: Scale(1s) = %s, want %s", Env, c.env, got, c.want)
		}
	}
}
