package hb

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func readerLines(n int) []string {
	out := make([]string, n)
	for i := range out {
		f := []string{strconv.Itoa(i % 2)}
		for j := 0; j < 13; j++ {
			if j%3 == 0 {
				f = append(f, "")
			} else {
				f = append(f, strconv.Itoa(i*j))
			}
		}
		f = append(f, fmt.Sprintf("%x", i)) // serial
		for k := 1; k < 26; k++ {
			if k%4 == 0 {
				f = append(f, "")
			} else {
				f = append(f, fmt.Sprintf("%x", i*31+k))
			}
		}
		out[i] = strings.Join(f, "\t")
	}
	return out
}

func writeLines(t *testing.T, lines []string) string {
	p := filepath.Join(t.TempDir(), "part.tsv")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReaderValuesAndShards(t *testing.T) {
	lines := readerLines(150)
	p := writeLines(t, lines)
	for world := 1; world <= 3; world++ {
		seen := map[int64]bool{}
		for rank := 0; rank < world; rank++ {
			cfg := DefaultReaderConfig()
			cfg.BatchSize, cfg.ShardIndex, cfg.NumShards, cfg.ChunkBytes = 16, int32(rank), int32(world), 700
			r, err := NewReader(nil, []string{p}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for {
				b, err := r.Next()
				if err != nil {
					t.Fatal(err)
				}
				if b == nil {
					break
				}
				for i := 0; i < b.Size; i++ {
					serial := b.IDs[b.Offsets[i]]
					if seen[serial] {
						t.Fatalf("line %d read twice", serial)
					}
					seen[serial] = true
					f := strings.Split(lines[serial], "\t")
					if want, _ := strconv.ParseFloat(f[0], 32); float32(want) != b.Labels[i] {
						t.Fatalf("label %v, want %v", b.Labels[i], want)
					}
					for j := 0; j < 13; j++ {
						want := 0.0
						if f[1+j] != "" {
							want, _ = strconv.ParseFloat(f[1+j], 32)
						}
						if float32(want) != b.Dense[i*13+j] {
							t.Fatalf("dense %d: %v, want %v", j, b.Dense[i*13+j], want)
						}
					}
					for k := 0; k < 26; k++ {
						lo, hi := b.Offsets[k*b.Size+i], b.Offsets[k*b.Size+i+1]
						if f[14+k] == "" {
							if hi != lo {
								t.Fatalf("empty field %d has ids", k)
							}
							continue
						}
						want, _ := strconv.ParseInt(f[14+k], 16, 64)
						if hi-lo != 1 || b.IDs[lo] != want {
							t.Fatalf("feature %d: ids %v, want %d", k, b.IDs[lo:hi], want)
						}
					}
				}
			}
			r.Close()
			r.Close()
		}
		if len(seen) != len(lines) {
			t.Fatalf("world %d: %d of %d lines read", world, len(seen), len(lines))
		}
	}
}

func TestReaderErrors(t *testing.T) {
	lines := readerLines(5)
	lines[2] = strings.Replace(lines[2], "\t", "\tx", 1)
	p := writeLines(t, lines)
	r, err := NewReader(nil, []string{p}, DefaultReaderConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Next()
	var e *Error
	if !errors.As(err, &e) || e.Status != ErrCorrupt || !strings.Contains(e.Message, p+": line 3, column 2") {
		t.Fatalf("got %v", err)
	}
	cfg := DefaultReaderConfig()
	cfg.SkipBadLines = true
	r2, err := NewReader(nil, []string{p}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if b, err := r2.Next(); err != nil || b.Size != 4 || r2.SkippedLines() != 1 {
		t.Fatalf("skip: %v %v %d", b, err, r2.SkippedLines())
	}
	_, err = NewReader(nil, []string{"/nonexistent/hb/x.tsv"}, DefaultReaderConfig())
	if !errors.As(err, &e) || e.Status != ErrIO || !strings.Contains(e.Message, "/nonexistent/hb/x.tsv") {
		t.Fatalf("got %v", err)
	}
}
