package main

import (
	"fmt"
	"io"
	"strings"
)

// side is one side of a comparison: a benchmark, and the name its metrics carry (mur, oras,
// floor...), or "" for an in-package benchmark whose wall time is ns/op and CPU cpu-ms/op.
type side struct{ bench, name string }

func (s side) key(k string) string { return s.name + "-" + k }

// cpu is the side's median CPU in ms.
func (s side) cpu(r result) (float64, bool) {
	if s.name == "" {
		v, ok := r.metrics["cpu-ms/op"]
		return v, ok
	}
	v, ok := r.metrics[s.key("cpu-ms")]
	return v, ok
}

// wall is the side's median wall time in ms.
func (s side) wall(r result) float64 {
	if v, ok := r.metrics[s.key("median-ms")]; ok && s.name != "" {
		return v
	}
	return r.nsPerOp / 1e6
}

// serving is the CPU in ms of what served the side (the registry, a proxy or test server in the
// benchmark's process), by what it was; empty when none was measured.
func (s side) serving(r result) map[string]float64 {
	out := map[string]float64{}
	if s.name == "" {
		return out
	}
	for _, who := range []string{"registry", "proxy", "github"} {
		if v, ok := r.metrics[s.key(who+"-cpu-ms")]; ok {
			out[who] = v
		}
	}
	return out
}

// total is the side's CPU with that of what served it.
func (s side) total(r result) (float64, bool) {
	v, ok := s.cpu(r)
	for _, c := range s.serving(r) {
		v += c
	}
	return v, ok
}

// figure is what a row's ratio compares.
type figure int

const (
	faster   figure = iota // the peer's wall time over the subject's: > 1 is faster
	slower                 // the subject's wall time over the peer's: < 1 is faster
	cpu                    // the subject's CPU over the peer's: < 1 is cheaper
	cpuTotal               // the same with the CPU of what served each side
)

func (f figure) unit() string {
	return [...]string{"× speed", "× time", "× CPU", "× CPU, with what served it"}[f]
}

// row is one comparison against a target; ok is nil for a row measured with no target to meet.
type row struct {
	what          string
	subject, peer side
	figure        figure
	target        string
	ok            func(float64) bool
}

func atLeast(t float64) func(float64) bool { return func(r float64) bool { return r >= t } }
func atMost(t float64) func(float64) bool  { return func(r float64) bool { return r <= t } }
func above(t float64) func(float64) bool   { return func(r float64) bool { return r > t } }

// ratio is the row's figure, and whether both sides measured what it needs.
func (rw row) ratio(s, p result) (float64, bool) {
	switch rw.figure {
	case faster:
		return rw.peer.wall(p) / rw.subject.wall(s), true
	case slower:
		return rw.subject.wall(s) / rw.peer.wall(p), true
	case cpu:
		a, ok1 := rw.subject.cpu(s)
		b, ok2 := rw.peer.cpu(p)
		return a / b, ok1 && ok2 && b > 0
	default:
		a, ok1 := rw.subject.total(s)
		b, ok2 := rw.peer.total(p)
		return a / b, ok1 && ok2 && b > 0
	}
}

// writeTable writes the comparisons whose benchmarks ran; a row whose benchmark did not run
// says so.
func writeTable(w io.Writer, res map[string]result, rows []row) {
	fmt.Fprintln(w, "| comparison | mur: CPU / wall | peer: CPU / wall | serving CPU, mur / peer | figure | target | met |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- |")
	for _, rw := range rows {
		s, ok1 := res[rw.subject.bench]
		p, ok2 := res[rw.peer.bench]
		if !ok1 || !ok2 {
			fmt.Fprintf(w, "| %s | — | — | — | not measured | %s | — |\n", rw.what, rw.target)
			continue
		}
		r, measured := rw.ratio(s, p)
		fig, met := "not measured", "—"
		if measured {
			fig = fmt.Sprintf("%.2f %s", r, rw.figure.unit())
			if rw.ok != nil {
				met = yes(rw.ok(r))
			}
		}
		what := rw.what
		if n, ok := s.metrics[rw.subject.key("runs")]; ok && rw.subject.bench == rw.peer.bench {
			what += fmt.Sprintf(", median of %.0f alternating rounds", n)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", what, sideCell(rw.subject, s), sideCell(rw.peer, p),
			servingCell(rw.subject.serving(s), rw.peer.serving(p)), fig, rw.target, met)
	}
}

// sideCell is a side's CPU, then its wall time with the fastest and slowest round when known.
func sideCell(sd side, r result) string {
	c := "—"
	if v, ok := sd.cpu(r); ok {
		c = msCell(v)
	}
	c += " / " + msCell(sd.wall(r))
	lo, ok1 := r.metrics[sd.key("min-ms")]
	hi, ok2 := r.metrics[sd.key("max-ms")]
	if ok1 && ok2 && sd.name != "" {
		c += fmt.Sprintf(" (%.0f–%.0f)", lo, hi)
	}
	return c
}

func servingCell(s, p map[string]float64) string {
	var parts []string
	for _, who := range []string{"registry", "proxy", "github"} {
		a, ok1 := s[who]
		b, ok2 := p[who]
		switch {
		case ok1 && ok2:
			parts = append(parts, fmt.Sprintf("%s %.0f / %.0f ms", who, a, b))
		case ok1:
			parts = append(parts, fmt.Sprintf("%s %.0f ms / —", who, a))
		case ok2:
			parts = append(parts, fmt.Sprintf("%s — / %.0f ms", who, b))
		}
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, "; ")
}
