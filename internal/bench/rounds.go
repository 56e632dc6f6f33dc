package main

import (
	"slices"
)

// alternate measures governed and baseline in turn, rounds times each (A B
// A B …), so that what the shared machine does meanwhile falls on both
// alike, and returns each one's figure per round.
func alternate(rounds int, governed, baseline func() (float64, error)) (g, b []float64, err error) {
	for range max(1, rounds) {
		x, err := governed()
		if err != nil {
			return nil, nil, err
		}
		y, err := baseline()
		if err != nil {
			return nil, nil, err
		}
		g, b = append(g, x), append(b, y)
	}
	return g, b, nil
}

// roundsResult reports a figure measured in alternating rounds: the
// governed figure's median as the value, the baseline's as the baseline,
// and the median of the per-round ratios (governed / baseline) with their
// spread. met, when set, judges the value and the ratio against target.
func roundsResult(name, unit string, g, b []float64, target string, met func(value, ratio float64) bool) result {
	ratios := make([]float64, len(g))
	for i := range g {
		ratios[i] = g[i] / b[i]
	}
	value, base, ratio := median(slices.Clone(g)), median(slices.Clone(b)), median(slices.Clone(ratios))
	r := result{Name: name, Value: round(value), Unit: unit, Baseline: ptr(round(base)), Ratio: ptr(round2(ratio)),
		RatioMin: ptr(round2(slices.Min(ratios))), RatioMax: ptr(round2(slices.Max(ratios))), Rounds: len(ratios), Target: target}
	if met != nil {
		ok := met(value, ratio)
		r.Met = &ok
	}
	return r
}
