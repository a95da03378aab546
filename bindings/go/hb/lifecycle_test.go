package hb

import (
	"strings"
	"testing"
)

// min_count 2 (default 0.5 until admitted), max_rows 2 (LRU): the same
// story as the Python and Java tests.
func TestEmbeddingLifecycle(t *testing.T) {
	c := worldOfOne(t)
	defer c.Close()
	life := DefaultEmbeddingLifecycle()
	life.Admission, life.MinCount, life.DefaultValue = AdmitCount, 2, 0.5
	life.MaxRows, life.Score = 2, ScoreLRU
	cfg := DefaultEmbeddingConfig("life", 2)
	cfg.Optimizer, cfg.LearningRate = OptSGD, 1
	cfg.Lifecycle = &life
	e, err := NewEmbedding(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	g := []float32{1, 1}
	row := make([]float32, 2)
	for i := 0; i < 2; i++ {
		if err := e.Lookup([]int64{7}, row); err != nil || row[0] != 0.5 {
			t.Fatal("before admission", row, err)
		}
		if err := e.ApplyGradients([]int64{7}, g); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Lookup([]int64{7}, row); err != nil || row[0] != -1 {
		t.Fatal("after admission", row, err)
	}
	for id := int64(1); id <= 3; id++ {
		for k := 0; k < 2; k++ {
			if err := e.ApplyGradients([]int64{id}, g); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, err := e.LifecycleStats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Step != 8 || st.Rows != 2 || st.Admitted != 4 || st.Dropped != 4 ||
		st.EvictedCapacity != 2 {
		t.Fatalf("stats %+v", st)
	}
	plain, err := NewEmbedding(c, DefaultEmbeddingConfig("plain", 2))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.LifecycleStats(); err == nil ||
		!strings.Contains(err.Error(), "no lifecycle") {
		t.Fatal("stats of a plain table:", err)
	}
}
