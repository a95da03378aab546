package org.hb;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * Job checkpoints (hb_checkpoint, EXPERIMENTAL section of hb.h;
 * docs/fault-tolerance.md): tables, dense buffers, readers and metrics of
 * a job, consistent across ranks and atomic. Serving and evaluator hosts
 * use {@link #latest} (no context) to follow a training job, and
 * {@link #restoreLatest} / {@link #restore} to load its state.
 */
public final class Checkpoint extends NativeHandle {
  /** The newest complete checkpoint of a directory. */
  public static final class Latest {
    /** Its directory, or null when there is none. */
    public final String path;
    /** Its step, or -1. */
    public final long step;

    Latest(String path, long step) {
      this.path = path;
      this.step = step;
    }
  }

  /** Settings (hb_checkpoint_config); null fields take the options. */
  public static final class Config {
    String dir, jobId;
    int keep = 3;
    boolean asyncWrite;
    long timeoutMs;

    public Config dir(String d) { dir = d; return this; }
    public Config jobId(String id) { jobId = id; return this; }
    public Config keep(int k) { keep = k; return this; }
    public Config asyncWrite(boolean a) { asyncWrite = a; return this; }
    public Config timeoutMs(long t) { timeoutMs = t; return this; }
  }

  // What the native side points into: alive while this handle is.
  private final List<Object> kept = new ArrayList<>();

  private Checkpoint(long handle) { super(handle); }

  /** Collective: opens (or creates) the job's checkpoint directory. */
  public static Checkpoint create(Context ctx, Config config) throws HbException {
    hb_checkpoint_config c = new hb_checkpoint_config();
    try {
      c.setDir(config.dir);
      c.setJob_id(config.jobId);
      c.setKeep(config.keep);
      c.setAsync_write(config.asyncWrite ? 1 : 0);
      c.setTimeout_ms(config.timeoutMs);
      long[] out = new long[1];
      HbNative.hb_checkpoint_create(ctx.handle(), c, out);
      return new Checkpoint(out[0]);
    } finally {
      c.delete();
    }
  }

  /** The newest complete checkpoint in dir; needs no context. */
  public static Latest latest(String dir) throws HbException {
    String[] path = new String[1];
    long[] step = new long[1];
    HbNative.hb_checkpoint_latest(dir, path, step);
    return new Latest(path[0] == null || path[0].isEmpty() ? null : path[0], step[0]);
  }

  @Override
  void destroy(long h) { HbNative.hb_checkpoint_destroy(h); }

  public void addTable(Embedding table) throws HbException {
    HbNative.hb_checkpoint_add_table(handle(), table.handle());
    kept.add(table);
  }

  /** A dense buffer on the ps tasks (its values and optimizer slots). */
  public void addPsDense(PsDense dense) throws HbException {
    HbNative.hb_checkpoint_add_ps_dense(handle(), dense.handle());
    kept.add(dense);
  }

  public void addMetric(String name, Metric metric) throws HbException {
    HbNative.hb_checkpoint_add_metric(handle(), name, metric.handle());
    kept.add(metric);
  }

  public void addReader(Reader reader) throws HbException {
    HbNative.hb_checkpoint_add_reader(handle(), reader.handle());
    kept.add(reader);
  }

  /**
   * A dense buffer saved and restored in place: a direct ByteBuffer (its
   * memory does not move; a Java array would), all of its capacity.
   * perRank: this rank's own bytes; otherwise the same on every rank.
   */
  public void addBuffer(String name, ByteBuffer buffer, boolean perRank) throws HbException {
    if (buffer == null || !buffer.isDirect())
      throw new IllegalArgumentException("buffer: expected a direct ByteBuffer");
    HbNative.hb_checkpoint_add_buffer(handle(), name, buffer, buffer.capacity(),
        perRank ? Hb.HB_BUFFER_PER_RANK : Hb.HB_BUFFER_REPLICATED);
    kept.add(buffer);
  }

  public void setMeta(String key, String value) throws HbException {
    HbNative.hb_checkpoint_set_meta(handle(), key, value);
  }

  /** The value of key (after a restore: the checkpoint's). */
  public String getMeta(String key) throws HbException {
    String[] out = new String[1];
    HbNative.hb_checkpoint_get_meta(handle(), key, out);
    return out[0];
  }

  /** Collective, at a step boundary. */
  public void save(long step) throws HbException { HbNative.hb_checkpoint_save(handle(), step); }

  /** Waits until the last save is committed on every rank. */
  public void awaitCommit() throws HbException { HbNative.hb_checkpoint_wait(handle()); }

  /** Collective: the newest complete checkpoint restored; its step, or -1. */
  public long restoreLatest() throws HbException {
    long[] step = new long[1];
    HbNative.hb_checkpoint_restore_latest(handle(), step);
    return step[0];
  }

  /** Collective: the checkpoint at path restored; its step. */
  public long restore(String path) throws HbException {
    long[] step = new long[1];
    HbNative.hb_checkpoint_restore(handle(), path, step);
    return step[0];
  }

  /** The checkpoint the last restore used ("" when none). */
  public String restoredPath() throws HbException {
    String[] out = new String[1];
    HbNative.hbw_checkpoint_restored_path(handle(), out);
    return out[0];
  }
}
