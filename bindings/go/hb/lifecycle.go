package hb

import "hb.dev/hb/internal/capi"

// Admission kinds and eviction scores of a table's lifecycle
// (hb_embedding_lifecycle, EXPERIMENTAL; docs/table-lifecycle.md).
const (
	AdmitAll   int32 = 0
	AdmitCount int32 = 1
	AdmitBloom int32 = 2

	ScoreLRU int32 = 0
	ScoreLFU int32 = 1
)

// EmbeddingLifecycle mirrors hb_embedding_lifecycle: admission and eviction
// of a dynamic host table. Start from DefaultEmbeddingLifecycle (no
// admission, no eviction) and set EmbeddingConfig.Lifecycle. The eviction
// callback is C only.
type EmbeddingLifecycle struct {
	Admission     int32 // AdmitAll, AdmitCount or AdmitBloom
	MinCount      int32 // update steps that must carry an id
	BloomBytes    int64 // AdmitBloom: 8-bit counters, all ranks
	BloomFPR      float64
	DefaultValue  float32 // what an id not admitted yet reads
	EvictInterval int64   // update steps between boundaries
	TTLSteps      int64
	TTLSeconds    float64
	MaxRows       int64 // capacity of the whole table
	Score         int32 // ScoreLRU or ScoreLFU
	MinL2Norm     float64
}

// DefaultEmbeddingLifecycle is HB_EMBEDDING_LIFECYCLE_INIT.
func DefaultEmbeddingLifecycle() EmbeddingLifecycle {
	l := capi.NewEmbedding_lifecycle()
	defer capi.DeleteEmbedding_lifecycle(l)
	return EmbeddingLifecycle{
		Admission: l.GetAdmission(), MinCount: l.GetMin_count(),
		BloomBytes: l.GetBloom_bytes(), BloomFPR: l.GetBloom_fpr(),
		DefaultValue: l.GetDefault_value(), EvictInterval: l.GetEvict_interval(),
		TTLSteps: l.GetTtl_steps(), TTLSeconds: l.GetTtl_seconds(),
		MaxRows: l.GetMax_rows(), Score: l.GetScore(), MinL2Norm: l.GetMin_l2_norm(),
	}
}

// useIn copies the lifecycle into a native config.
func (l *EmbeddingLifecycle) useIn(c capi.Embedding_config) {
	n := capi.NewEmbedding_lifecycle()
	defer capi.DeleteEmbedding_lifecycle(n)
	n.SetAdmission(l.Admission)
	n.SetMin_count(l.MinCount)
	n.SetBloom_bytes(l.BloomBytes)
	n.SetBloom_fpr(l.BloomFPR)
	n.SetDefault_value(l.DefaultValue)
	n.SetEvict_interval(l.EvictInterval)
	n.SetTtl_steps(l.TTLSteps)
	n.SetTtl_seconds(l.TTLSeconds)
	n.SetMax_rows(l.MaxRows)
	n.SetScore(l.Score)
	n.SetMin_l2_norm(l.MinL2Norm)
	c.Use_lifecycle(n)
}

// LifecycleStats are this rank's counters (hb_embedding_lifecycle_stats).
type LifecycleStats struct {
	Step, Rows, Pending, Admitted, Dropped                int64
	EvictedTTL, EvictedL2, EvictedCapacity                int64
	Boundaries, SelectionRounds, BoundaryMicros, MemBytes int64
}

// LifecycleStats returns this rank's counters; a table with a lifecycle only.
func (e *Embedding) LifecycleStats() (LifecycleStats, error) {
	s := make([]int64, 12)
	if err := capi.Hb_embedding_lifecycle_get_stats(e.raw(), ptr(s)); err != nil {
		return LifecycleStats{}, err
	}
	return LifecycleStats{s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9],
		s[10], s[11]}, nil
}
