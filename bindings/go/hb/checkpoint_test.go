package hb

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckpointRestoreAndLatest(t *testing.T) {
	dir := t.TempDir()
	if p, s, err := LatestCheckpoint(filepath.Join(dir, "none")); err != nil || p != "" || s != -1 {
		t.Fatalf("latest of a missing dir: %q %d %v", p, s, err)
	}
	c, err := NewContext(WithRank(0), WithWorldSize(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	e, err := NewEmbedding(c, DefaultEmbeddingConfig("gt", 4))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	job := "go"
	k, err := NewCheckpoint(c, CheckpointConfig{Dir: dir, JobID: &job})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if err := k.AddTable(e); err != nil {
		t.Fatal(err)
	}
	if s, err := k.RestoreLatest(); err != nil || s != -1 {
		t.Fatalf("fresh start: %d %v", s, err)
	}
	ids := []int64{3, 42}
	if err := e.ApplyGradients(ids, []float32{1, 1, 1, 1, 2, 2, 2, 2}); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 8)
	if err := e.Lookup(ids, want); err != nil {
		t.Fatal(err)
	}
	if err := k.SetMeta("k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := k.Save(7); err != nil {
		t.Fatal(err)
	}
	if err := e.ApplyGradients(ids, []float32{5, 5, 5, 5, 5, 5, 5, 5}); err != nil {
		t.Fatal(err)
	}
	p, s, err := LatestCheckpoint(dir)
	if err != nil || s != 7 || !strings.Contains(p, "ckpt-000000000007-") {
		t.Fatalf("latest: %q %d %v", p, s, err)
	}
	if s, err := k.RestoreLatest(); err != nil || s != 7 {
		t.Fatalf("restore: %d %v", s, err)
	}
	got := make([]float32, 8)
	if err := e.Lookup(ids, got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("row value %d: %v, want %v", i, got[i], want[i])
		}
	}
	if v, err := k.Meta("k"); err != nil || v != "v" {
		t.Fatalf("meta: %q %v", v, err)
	}
	if rp, err := k.RestoredPath(); err != nil || rp != p {
		t.Fatalf("restored path %q, want %q (%v)", rp, p, err)
	}
	other := "another"
	if _, err := NewCheckpoint(c, CheckpointConfig{Dir: dir, JobID: &other}); err == nil ||
		!strings.Contains(err.Error(), "'go'") {
		t.Fatalf("another job's directory: %v", err)
	}
}
