package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orangerail/orangerail/internal/policy"
	"github.com/orangerail/orangerail/internal/policy/apispec"
)

// policyCorpus is the real API descriptions the compiler is tried on.
const policyCorpus = "internal/policy/testdata/apispecs"

// policyCompile measures the policy compiler over the whole corpus: read,
// resolve, compile and marshal each document, in operations a second. The
// baseline decodes the same files into plain values (encoding/json,
// yaml.v3, an encoding/xml token pass) and does nothing else: the floor any
// reader pays. It also reports the slowest document's time, the budget the
// issue sets ("well under a second each").
func policyCompile(emit func(result)) error {
	entries, err := os.ReadDir(policyCorpus)
	if err != nil {
		return err
	}
	var files []string
	for _, e := range entries {
		if e.Name() != "INDEX.md" {
			files = append(files, filepath.Join(policyCorpus, e.Name()))
		}
	}
	const runs = 5
	var compiled, decoded []float64
	slowest := map[string][]float64{}
	ops := 0
	for r := range runs {
		start, n := time.Now(), 0
		for _, path := range files {
			t0 := time.Now()
			f, err := apispec.Read(path)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			m, err := policy.Compile(f.Doc, policy.Options{Service: "bench", File: f.Name, SHA256: f.SHA256})
			if err != nil {
				return err
			}
			if _, err := m.Marshal(); err != nil {
				return err
			}
			n += len(m.Tools)
			slowest[path] = append(slowest[path], float64(time.Since(t0).Milliseconds()))
		}
		compiled = append(compiled, float64(n)/time.Since(start).Seconds())
		if r == 0 {
			ops = n
		}
		start = time.Now()
		for _, path := range files {
			if err := decodeOnly(path); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
		decoded = append(decoded, float64(ops)/time.Since(start).Seconds())
	}
	value, baseline := median(compiled), median(decoded)
	ratio := value / baseline
	emit(result{Name: "policy_compile", Value: value, Unit: fmt.Sprintf("operations/s (%d operations in %d documents)", ops, len(files)), Baseline: &baseline, Ratio: &ratio})
	worst, worstMS := "", 0.0
	for path, ms := range slowest {
		if m := median(ms); m > worstMS {
			worst, worstMS = path, m
		}
	}
	emit(result{Name: "policy_compile_slowest_document", Value: worstMS, Unit: "ms (" + filepath.Base(worst) + ")"})
	return nil
}

// decodeOnly reads a file into plain values, as cheaply as its format
// allows.
func decodeOnly(path string) error {
	data, err := os.ReadFile(path) //nolint:gosec // G304: the bench's own corpus
	if err != nil {
		return err
	}
	var v any
	switch trimmed := bytes.TrimLeft(data, " \t\r\n\ufeff"); {
	case len(trimmed) > 0 && trimmed[0] == '<':
		dec := xml.NewDecoder(bytes.NewReader(data))
		for {
			if _, err := dec.Token(); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
	case len(trimmed) > 0 && trimmed[0] == '{':
		return json.Unmarshal(data, &v)
	}
	return yaml.Unmarshal(data, &v)
}

// median is the middle of xs (sorted in place).
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}
