package org.hb;

/**
 * Multi-rank check of the Java binding, run by hbrun (ctest java_binding_mp):
 * allreduce, an embedding lookup/update and AUC against references computed
 * here, plus an error case. Exits non-zero on the first mismatch.
 */
public final class MultiRankCheck {
  private MultiRankCheck() {}

  private static void check(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
  }

  public static void main(String[] args) throws Exception {
    try (Context ctx = Context.create()) {
      int rank = ctx.rank(), world = ctx.worldSize();
      check(world >= 2, "run me under hbrun -n 2 or more");

      float[] x = new float[8];
      for (int i = 0; i < 8; ++i) x[i] = i * (rank + 1);
      ctx.allreduce(x, x, Hb.HB_SUM);
      int factor = world * (world + 1) / 2;
      for (int i = 0; i < 8; ++i) check(x[i] == i * factor, "allreduce element " + i + ": " + x[i]);

      // allreduceStart: bit-identical to allreduce, two in flight, a
      // blocking collective between start and wait.
      java.util.Random rng = new java.util.Random(rank);
      int n = 3001;
      java.nio.ByteBuffer a = java.nio.ByteBuffer.allocateDirect(4 * n).order(java.nio.ByteOrder.nativeOrder());
      java.nio.ByteBuffer b = java.nio.ByteBuffer.allocateDirect(4 * n).order(java.nio.ByteOrder.nativeOrder());
      float[] plain = new float[n];
      for (int i = 0; i < n; ++i) {
        // Magnitudes far apart: any other order than rank order changes bits.
        plain[i] = (float) (rng.nextGaussian() * Math.pow(10, rng.nextInt(13) - 6));
        a.putFloat(4 * i, plain[i]);
        b.putFloat(4 * i, -plain[i]);
      }
      java.nio.ByteBuffer out = java.nio.ByteBuffer.allocateDirect(4 * n).order(java.nio.ByteOrder.nativeOrder());
      try (AllreduceRequest ra = ctx.allreduceStart(a, out, Hb.HB_FLOAT32, Hb.HB_SUM);
           AllreduceRequest rb = ctx.allreduceStart(b, b, Hb.HB_FLOAT32, Hb.HB_SUM)) {
        ctx.allreduce(plain, plain, Hb.HB_SUM);
        ra.waitFor();
        rb.waitFor();
      }
      for (int i = 0; i < n; ++i) {
        check(Float.floatToRawIntBits(out.getFloat(4 * i)) == Float.floatToRawIntBits(plain[i]),
            "allreduceStart element " + i + ": " + out.getFloat(4 * i) + " != " + plain[i]);
        check(Float.floatToRawIntBits(b.getFloat(4 * i)) == Float.floatToRawIntBits(-plain[i]),
            "allreduceStart in place element " + i + ": " + b.getFloat(4 * i) + " != " + -plain[i]);
      }

      float lr = 0.125f, init = 0.5f;
      try (Embedding emb = Embedding.create(ctx, new EmbeddingConfig("mp_table", 4)
               .initializer(Hb.HB_INIT_CONSTANT, init, 0).optimizer(Hb.HB_OPT_SGD, lr))) {
        long[] ids = {rank, 7, 100 + rank, 7};
        for (float v : emb.lookup(ids)) check(v == init, "initial row value " + v);
        float[] grads = new float[16];
        java.util.Arrays.fill(grads, rank + 1);
        emb.applyGradients(ids, grads);
        long[] every = new long[2 * world + 1];
        for (int r = 0; r < world; ++r) {
          every[r] = r;
          every[world + 1 + r] = 100 + r;
        }
        every[world] = 7;
        float[] rows = emb.lookup(every);
        for (int k = 0; k < every.length; ++k) {
          double want = every[k] == 7 ? init - lr * 2.0 * factor : init - lr * ((every[k] % 100) + 1);
          for (int d = 0; d < 4; ++d) {
            check(Math.abs(rows[k * 4 + d] - want) < 1e-6, "row " + every[k] + ": " + rows[k * 4 + d] + " != " + want);
          }
        }
        emb.lookup(new long[rank * 3]);  // ranks may pass different counts
      }

      float[][] s = Reference.samples(1000, 42);
      try (Metric dist = Metric.create(ctx, new MetricConfig(Hb.HB_METRIC_AUC_EXACT));
           Metric local = Metric.create(null, new MetricConfig(Hb.HB_METRIC_AUC_EXACT))) {
        dist.update(Reference.slice(s[0], rank, world), Reference.slice(s[1], rank, world),
            Reference.slice(s[2], rank, world));
        local.update(s[0], s[1], s[2]);
        double got = dist.result(), single = local.result(), want = Reference.exactAuc(s[0], s[1], s[2]);
        check(got == single, "distributed AUC " + got + " != single-process " + single);
        check(Math.abs(got - want) < 1e-12, "AUC " + got + " != reference " + want);
      }

      try {
        ctx.setOption("no_such_option", "1");
        check(false, "unknown option accepted");
      } catch (HbException e) {
        check(e.status() == Hb.HB_ERR_CONFIG && e.detail().contains("no_such_option"), e.getMessage());
      }
      ctx.barrier(0);
      System.out.println("rank " + rank + " of " + world + ": java binding ok");
    }
  }
}
