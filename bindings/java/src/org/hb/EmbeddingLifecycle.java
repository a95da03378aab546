package org.hb;

/**
 * Admission and eviction of a dynamic host table (hb_embedding_lifecycle,
 * EXPERIMENTAL; docs/table-lifecycle.md). Unset fields keep hb.h's
 * HB_EMBEDDING_LIFECYCLE_INIT defaults (no admission, no eviction); pass it
 * to {@link EmbeddingConfig#lifecycle}. The eviction callback is C only.
 */
public final class EmbeddingLifecycle {
  private final hb_embedding_lifecycle n = new hb_embedding_lifecycle();

  /** Hb.HB_ADMIT_COUNT or Hb.HB_ADMIT_BLOOM: an id gets a row at its
   *  minCount-th update step. */
  public EmbeddingLifecycle admission(int kind, int minCount) {
    n.setAdmission(kind);
    n.setMin_count(minCount);
    return this;
  }
  /** HB_ADMIT_BLOOM: total 8-bit counters (all ranks) and false-positive rate. */
  public EmbeddingLifecycle bloom(long bytes, double fpr) {
    n.setBloom_bytes(bytes);
    n.setBloom_fpr(fpr);
    return this;
  }
  /** What an id that is not admitted yet reads, in every column. */
  public EmbeddingLifecycle defaultValue(float v) { n.setDefault_value(v); return this; }
  /** Update steps between eviction boundaries. */
  public EmbeddingLifecycle evictInterval(long v) { n.setEvict_interval(v); return this; }
  public EmbeddingLifecycle ttlSteps(long v) { n.setTtl_steps(v); return this; }
  public EmbeddingLifecycle ttlSeconds(double v) { n.setTtl_seconds(v); return this; }
  /** Capacity of the whole table; score Hb.HB_SCORE_LRU or Hb.HB_SCORE_LFU. */
  public EmbeddingLifecycle maxRows(long v, int score) {
    n.setMax_rows(v);
    n.setScore(score);
    return this;
  }
  public EmbeddingLifecycle minL2Norm(double v) { n.setMin_l2_norm(v); return this; }

  hb_embedding_lifecycle toNative() { return n; }
}
