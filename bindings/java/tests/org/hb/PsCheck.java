package org.hb;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Parameter-server mode from Java, run by hbrun -n 3 --ps 2 (ctest
 * java_ps; three workers, so that the rank order of the sums shows): every task runs this program; the ps task serves, the workers
 * train a ps table (SGD, gradients that depend on the rows pulled) and a
 * dense buffer for a few steps at staleness 0, marking positions (bytes
 * with a NUL). The rows and every dense pull are bit-equal to a
 * single-process reference of the ps's rounds (each id's workers' sums
 * added in rank order, one optimizer step per round); the last position
 * comes back from psPosition; the stats count the pushes and no staleness.
 */
public final class PsCheck {
  private PsCheck() {}

  static final int STEPS = 5, ROWS = 20, DIM = 3, DENSE = 300;
  static final float LR = 0.25f, DENSE_LR = 0.5f;

  private static void check(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
  }

  static long[] batch(int rank, int step) {
    long[] ids = new long[4 + rank + step % 2];
    for (int k = 0; k < ids.length; ++k) ids[k] = (rank * 7 + step * 3 + k * 5) % ROWS;  // duplicates too
    return ids;
  }

  static float grad(float row, long id, int rank, int step, int d) {
    return row * 0.5f + (id * 0.01f + rank - step * 0.1f + d);
  }

  static float denseGrad(int rank, int step, int i) {
    return 1e-3f * (float) Math.sin(i + 7 * rank + step);
  }

  static byte[] position(int rank, int step) {
    return new byte[] {(byte) rank, 0, (byte) step, 'p'};
  }

  public static void main(String[] args) throws Exception {
    try (Context ctx = Context.create()) {
      if (ctx.taskType().equals("ps")) {
        ctx.serve();
        return;
      }
      int rank = ctx.rank(), world = ctx.worldSize();
      check(ctx.numPs() >= 1, "numPs " + ctx.numPs());
      check(ctx.psPosition() == null, "a position before any step");

      // The reference: the ps's rounds in one process.
      float[] w = new float[ROWS * DIM];
      Arrays.fill(w, 0.5f);
      float[] d = new float[DENSE];
      for (int i = 0; i < DENSE; ++i) d[i] = 0.001f * i;
      float[][] denseSeen = new float[STEPS][];
      for (int s = 0; s < STEPS; ++s) {
        denseSeen[s] = d.clone();
        Map<Long, float[]> total = new LinkedHashMap<>();
        for (int r = 0; r < world; ++r) {
          Map<Long, float[]> mine = new LinkedHashMap<>();
          for (long id : batch(r, s)) {  // batch order
            float[] g = mine.get(id);
            float[] row = new float[DIM];
            for (int c = 0; c < DIM; ++c) row[c] = grad(w[(int) id * DIM + c], id, r, s, c);
            if (g == null) {
              mine.put(id, row);
            } else {
              for (int c = 0; c < DIM; ++c) g[c] += row[c];
            }
          }
          for (Map.Entry<Long, float[]> e : mine.entrySet()) {  // rank order
            float[] t = total.get(e.getKey());
            if (t == null) {
              total.put(e.getKey(), e.getValue());
            } else {
              for (int c = 0; c < DIM; ++c) t[c] += e.getValue()[c];
            }
          }
        }
        for (Map.Entry<Long, float[]> e : total.entrySet()) {
          for (int c = 0; c < DIM; ++c) {
            int at = (int) (long) e.getKey() * DIM + c;
            w[at] = w[at] - LR * e.getValue()[c];
          }
        }
        for (int i = 0; i < DENSE; ++i) {
          float sum = denseGrad(0, s, i);
          for (int r = 1; r < world; ++r) sum += denseGrad(r, s, i);
          d[i] = d[i] - DENSE_LR * sum;
        }
      }

      float[] init = new float[DENSE];
      for (int i = 0; i < DENSE; ++i) init[i] = 0.001f * i;
      try (Embedding emb = Embedding.create(ctx, new EmbeddingConfig("java_ps", DIM).numRows(ROWS)
               .initializer(Hb.HB_INIT_CONSTANT, 0.5, 0).optimizer(Hb.HB_OPT_SGD, LR)
               .placement(Hb.HB_PLACEMENT_PS));
           PsDense dense = PsDense.create(ctx,
               new PsDenseConfig("java_dense", DENSE).optimizer(Hb.HB_OPT_SGD, DENSE_LR), init)) {
        check(emb.localRows() == 0, "a ps table holds no rows on a worker");
        // Pulls into a direct buffer (zero-copy) and into a float[].
        ByteBuffer direct = ByteBuffer.allocateDirect(4 * DENSE).order(ByteOrder.nativeOrder());
        for (int s = 0; s < STEPS; ++s) {
          float[] got;
          if (s % 2 == 0) {
            dense.pull(direct);
            got = new float[DENSE];
            direct.asFloatBuffer().get(got);
          } else {
            got = dense.pull();
          }
          for (int i = 0; i < DENSE; ++i) {
            check(Float.floatToRawIntBits(got[i]) == Float.floatToRawIntBits(denseSeen[s][i]),
                "rank " + rank + " step " + s + ": dense[" + i + "] " + got[i] + " != " + denseSeen[s][i]);
          }
          long[] ids = batch(rank, s);
          float[] rows = emb.lookup(ids);
          float[] g = new float[rows.length];
          for (int k = 0; k < ids.length; ++k) {
            for (int c = 0; c < DIM; ++c) g[k * DIM + c] = grad(rows[k * DIM + c], ids[k], rank, s, c);
          }
          ctx.psSetPosition(position(rank, s + 1));
          emb.applyGradients(ids, g);
          float[] dg = new float[DENSE];
          for (int i = 0; i < DENSE; ++i) dg[i] = denseGrad(rank, s, i);
          dense.push(dg);
        }
        long[] step = new long[1];
        byte[] pos = ctx.psPosition(step);
        check(Arrays.equals(pos, position(rank, STEPS)) && step[0] == STEPS,
            "position " + Arrays.toString(pos) + " at step " + step[0]);
        long[] all = new long[ROWS];
        for (int i = 0; i < ROWS; ++i) all[i] = i;
        float[] rows = emb.lookup(all);  // after every worker's last round
        for (int i = 0; i < rows.length; ++i) {
          check(Float.floatToRawIntBits(rows[i]) == Float.floatToRawIntBits(w[i]),
              "rank " + rank + ": row value " + i + " " + rows[i] + " != reference " + w[i]);
        }
        float[] last = dense.pull();
        for (int i = 0; i < DENSE; ++i) {
          check(Float.floatToRawIntBits(last[i]) == Float.floatToRawIntBits(d[i]), "final dense[" + i + "]");
        }
        PsStats st = ctx.psStats();
        check(st.pushes >= 2L * world * STEPS && st.rounds >= STEPS && st.maxStaleness == 0
            && st.boundViolations == 0 && st.rowsPulled > 0, st.toString());
        try {
          dense.push(new float[5]);
          check(false, "a short gradient was taken");
        } catch (IllegalArgumentException e) {
          check(e.getMessage().contains("grads: needs 300"), e.getMessage());
        }
        try {
          ctx.serve();
          check(false, "a worker served");
        } catch (HbException e) {
          check(e.getMessage().contains("not a ps task"), e.getMessage());
        }
        System.out.println("rank " + rank + ": ps table and dense buffer bit-equal to the reference after "
            + STEPS + " steps; " + st);
      }
      splits(ctx, rank);
    }
  }

  static final int SPLIT_SAMPLES = 600;  // HB_PS_SPLIT_SAMPLES of ctest java_ps

  /**
   * Dynamic splits (HB_PS_SPLIT_* set by ctest): each worker takes splits
   * until none is left, pushing -1 per sample with psSplitCommit before the
   * push; after a barrier (every worker's table closed: nobody waits for
   * another's round) every sample's row is 1 (zeros minus -1), exactly once.
   */
  static void splits(Context ctx, int rank) throws HbException {
    long taken = 0;
    EmbeddingConfig cfg = new EmbeddingConfig("java_splits", 1).numRows(SPLIT_SAMPLES)
        .optimizer(Hb.HB_OPT_SGD, 1.0).placement(Hb.HB_PLACEMENT_PS);
    try (Embedding emb = Embedding.create(ctx, cfg)) {
      // psSplitTry (never waits): LATER while the others hold the rest.
      for (PsSplit sp = ctx.psSplitTry(); sp != null; sp = ctx.psSplitTry()) {
        if (sp.split == Context.PS_SPLIT_LATER) {
          java.util.concurrent.locks.LockSupport.parkNanos(5_000_000L);
          continue;
        }
        check(sp.begin <= sp.from && sp.from < sp.end, sp.toString());
        for (long at = sp.from; at < sp.end;) {
          long end = Math.min(sp.end, at + 7);
          long[] ids = new long[(int) (end - at)];
          for (int k = 0; k < ids.length; ++k) ids[k] = at + k;
          ctx.psSplitCommit(sp.split, end);
          float[] g = new float[ids.length];
          Arrays.fill(g, -1f);
          emb.applyGradients(ids, g);
          taken += ids.length;
          at = end;
        }
      }
      try {
        ctx.psSplitCommit(0, 1);
        check(false, "a commit without a split was taken");
      } catch (HbException e) {
        check(e.getMessage().contains("not this worker's"), e.getMessage());
      }
    }
    ctx.barrier(20000);
    try (Embedding emb = Embedding.create(ctx, cfg)) {
      long[] all = new long[SPLIT_SAMPLES];
      for (int i = 0; i < SPLIT_SAMPLES; ++i) all[i] = i;
      float[] rows = emb.lookup(all);
      for (int i = 0; i < SPLIT_SAMPLES; ++i) check(rows[i] == 1f, "sample " + i + ": " + rows[i]);
    }
    System.out.println("rank " + rank + ": took " + taken + " of " + SPLIT_SAMPLES
        + " samples in dynamic splits; each applied exactly once");
  }
}
