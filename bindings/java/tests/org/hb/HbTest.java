package org.hb;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.File;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import org.junit.Test;

/** Single-process tests of the Java binding (ctest java_binding). */
public class HbTest {
  private static Context worldOfOne() throws HbException {
    return Context.create(new ContextOptions().rank(0).worldSize(1));
  }

  @Test
  public void versionAndStatusNames() {
    assertEquals(Hb.HB_VERSION_NUMBER, Hb.versionNumber());
    assertTrue(Hb.buildInfo().startsWith("hb "));
    assertEquals("HB_ERR_TIMEOUT", Hb.statusName(Hb.HB_ERR_TIMEOUT));
    assertEquals(4, Hb.dtypeSize(Hb.HB_FLOAT32));
    assertEquals(0, Hb.dtypeSize(99));
  }

  @Test
  public void failedCallThrowsStatusAndMessage() {
    try {
      Hb.shardRange(10, 0, 0, false);
      fail("zero shards accepted");
    } catch (HbException e) {
      assertEquals(Hb.HB_ERR_INVALID_ARGUMENT, e.status());
      assertEquals("HB_ERR_INVALID_ARGUMENT", e.statusName());
      assertFalse(e.detail().isEmpty());
      assertEquals(e.detail(), Hb.lastError());
      assertEquals("HB_ERR_INVALID_ARGUMENT: " + e.detail(), e.getMessage());
    }
  }

  @Test
  public void concurrentErrorsKeepTheirMessage() throws Exception {
    java.util.List<String> bad = java.util.Collections.synchronizedList(new java.util.ArrayList<>());
    Thread[] threads = new Thread[8];
    for (int t = 0; t < threads.length; ++t) {
      final int id = t;
      threads[t] = new Thread(() -> {
        for (int i = 0; i < 200; ++i) {
          String name = "no_such_option_" + id + "_" + i;
          try {
            Hb.getOption(name);
            bad.add(name + ": accepted");
          } catch (HbException e) {
            if (!e.detail().contains(name)) bad.add(name + ": " + e.detail());
          }
        }
      });
      threads[t].start();
    }
    for (Thread th : threads) th.join();
    assertTrue(bad.toString(), bad.isEmpty());
  }

  @Test
  public void shardRangePlacementAndTfConfig() throws HbException {
    long covered = 0;
    for (int s = 0; s < 3; ++s) {
      long[] r = Hb.shardRange(10, 3, s, false);
      assertEquals(covered, r[0]);
      covered = r[1];
    }
    assertEquals(10, covered);
    Hb.Placement p = Hb.placementReplication(4, 0, 3);
    assertTrue(p.buildSubnetwork(0) && p.buildSubnetwork(2));
    String json = Hb.tfConfigBuild("worker", 0, new String[] {"h0:1", "h1:2"}, null, false);
    assertTrue(json, json.contains("\"chief\"") && json.contains("h1:2"));
    String[] opt = Hb.describeOption(0);
    assertEquals(4, opt.length);
    assertEquals(opt[2], Hb.getOption(opt[0]));
  }

  @Test
  public void localMetricsMatchReference() throws HbException {
    float[][] s = Reference.samples(400, 7);
    try (Metric auc = Metric.create(null, new MetricConfig(Hb.HB_METRIC_AUC_EXACT))) {
      auc.update(s[0], s[1], s[2]);
      assertEquals(Reference.exactAuc(s[0], s[1], s[2]), auc.result(), 1e-12);
      auc.reset();
      assertEquals(0.0, auc.result(), 0.0);
      assertTrue((auc.flags() & Hb.HB_METRIC_FLAG_EMPTY) != 0);
    }
    // The same through direct ByteBuffers (zero-copy).
    try (Metric mean = Metric.create(null, new MetricConfig(Hb.HB_METRIC_MEAN))) {
      ByteBuffer labels = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder());
      ByteBuffer preds = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder());
      preds.putFloat(0, 0.25f).putFloat(4, 0.75f);
      mean.update(labels, preds, null);
      assertEquals(0.5, mean.result(), 0.0);
    }
  }

  /** The ps calls reach the library and refuse a job without ps tasks (PsCheck runs a real ps job). */
  @Test
  public void psCallsWithoutPsTasksThrow() throws HbException {
    try (Context ctx = worldOfOne()) {
      assertEquals(0, ctx.numPs());
      try {
        Embedding.create(ctx, new EmbeddingConfig("on_ps", 4).numRows(10).placement(Hb.HB_PLACEMENT_PS)).close();
        fail("a ps table without ps tasks");
      } catch (HbException e) {
        assertEquals(Hb.HB_ERR_INVALID_ARGUMENT, e.status());
        assertTrue(e.getMessage(), e.getMessage().contains("no ps tasks"));
      }
      try {
        PsDense.create(ctx, new PsDenseConfig("dense", 4), null).close();
        fail("a dense buffer without ps tasks");
      } catch (HbException e) {
        assertTrue(e.getMessage(), e.getMessage().contains("no ps tasks"));
      }
      try {
        ctx.psStats();
        fail("stats without ps tasks");
      } catch (HbException e) {
        assertEquals(Hb.HB_ERR_INVALID_ARGUMENT, e.status());
      }
      try {
        PsDense.create(ctx, new PsDenseConfig("dense", 4), new float[3]);
        fail("a short init");
      } catch (IllegalArgumentException e) {
        assertTrue(e.getMessage(), e.getMessage().contains("init: needs 4"));
      }
    }
  }

  @Test
  public void badArgumentsThrowWithTheirName() throws HbException {
    try (Metric m = Metric.create(null, new MetricConfig(Hb.HB_METRIC_AUC))) {
      try {
        m.update(new float[4], new float[3], null);
        fail("short preds accepted");
      } catch (IllegalArgumentException e) {
        assertEquals("preds: needs 4 elements, has 3", e.getMessage());
      }
      try {
        m.update(new double[4], new float[4], null);
        fail("double labels accepted");
      } catch (IllegalArgumentException e) {
        assertTrue(e.getMessage(), e.getMessage().startsWith("labels: double[] cannot hold"));
      }
      try {
        m.update(ByteBuffer.allocate(16), new float[4], null);
        fail("heap ByteBuffer accepted");
      } catch (IllegalArgumentException e) {
        assertTrue(e.getMessage(), e.getMessage().contains("not direct"));
      }
    }
    try {
      Metric.create(null, new MetricConfig(99));
      fail("metric kind 99 accepted");
    } catch (HbException e) {
      assertEquals(Hb.HB_ERR_INVALID_ARGUMENT, e.status());
    }
    Metric closed = Metric.create(null, new MetricConfig(Hb.HB_METRIC_MEAN));
    closed.close();
    closed.close();
    try {
      closed.result();
      fail("closed metric used");
    } catch (IllegalStateException e) {
      assertEquals("Metric is closed", e.getMessage());
    }
  }

  @Test
  public void collectivesInAWorldOfOne() throws HbException {
    try (Context ctx = worldOfOne()) {
      assertEquals(0, ctx.rank());
      assertEquals(1, ctx.worldSize());
      assertTrue(ctx.isChief());
      ctx.setOption("timeout_ms", "4321");
      assertEquals("4321", ctx.getOption("timeout_ms"));
      try {
        ctx.setOption("timeout_ms", "soon");
        fail("malformed option accepted");
      } catch (HbException e) {
        assertEquals(Hb.HB_ERR_CONFIG, e.status());
        assertTrue(e.detail(), e.detail().contains("timeout_ms"));
      }
      float[] x = {1, 2, 3};
      float[] y = new float[3];
      ctx.allreduce(x, y, Hb.HB_SUM);
      assertArrayEquals(x, y, 0f);
      long[] l = {5, 6};
      ctx.allreduce(l, l, Hb.HB_MAX);
      assertArrayEquals(new long[] {5, 6}, l);
      int[] g = new int[2];
      ctx.allgather(new int[] {3, 4}, g);
      assertArrayEquals(new int[] {3, 4}, g);
      ByteBuffer bb = ByteBuffer.allocateDirect(4).order(ByteOrder.nativeOrder());
      bb.putShort(0, (short) 0x3C00);
      ctx.allreduce(bb, bb, Hb.HB_FLOAT16, Hb.HB_SUM);
      assertEquals(0x3C00, bb.getShort(0));
      ByteBuffer ab = ByteBuffer.allocateDirect(12).order(ByteOrder.nativeOrder());
      ab.putFloat(0, 1.5f).putFloat(8, -2f);
      try (AllreduceRequest req = ctx.allreduceStart(ab, ab, Hb.HB_FLOAT32, Hb.HB_MAX)) {
        req.waitFor();
        assertTrue(req.done());
        assertEquals(1.5f, ab.getFloat(0), 0f);
        assertEquals(-2f, ab.getFloat(8), 0f);
        try {
          req.waitFor();
          fail("a second wait accepted");
        } catch (IllegalStateException e) {
          assertTrue(e.getMessage(), e.getMessage().contains("already waited"));
        }
      }
      try {
        ctx.allreduceStart(ByteBuffer.allocate(8), ab, Hb.HB_FLOAT32, Hb.HB_SUM);
        fail("a heap ByteBuffer accepted");
      } catch (IllegalArgumentException e) {
        assertTrue(e.getMessage(), e.getMessage().startsWith("send: the ByteBuffer is not direct"));
      }
      double[] a = {1}, b = {2, 2};
      ctx.allreduceMany(new Object[] {a, b}, Hb.HB_SUM);
      assertArrayEquals(new double[] {2, 2}, b, 0);
      boolean[] sync = ctx.dataSync(true, false);
      assertTrue(sync[0] && !sync[1]);
      try {
        ctx.allreduce(new float[4], new float[2], Hb.HB_SUM);
        fail("short recv accepted");
      } catch (IllegalArgumentException e) {
        assertEquals("recv: needs 4 elements, has 2", e.getMessage());
      }
      try {
        ctx.allreduce(new float[2], new float[2], 77);
        fail("reduce op 77 accepted");
      } catch (HbException e) {
        assertEquals(Hb.HB_ERR_INVALID_ARGUMENT, e.status());
        assertTrue(e.detail(), e.detail().contains("77"));
      }
    }
  }

  @Test
  public void embeddingAndServing() throws Exception {
    File dir = Files.createTempDirectory("hbjava").toFile();
    String path = new File(dir, "t.hbe").getPath();
    try (Context ctx = worldOfOne();
         Embedding emb = Embedding.create(ctx, new EmbeddingConfig("t", 2).optimizer(Hb.HB_OPT_SGD, 0.5))) {
      long[] ids = {4, 2, 4};
      assertArrayEquals(new float[6], emb.lookup(ids), 0f);
      emb.applyGradients(ids, new float[] {1, 1, 1, 1, 1, 1});
      assertArrayEquals(new float[] {-1, -1, -0.5f, -0.5f}, emb.lookup(new long[] {4, 2}), 0f);
      emb.export(path);
    }
    try (Embedding serving = Embedding.open(path)) {
      assertArrayEquals(new float[] {-0.5f, -0.5f, 0, 0}, serving.lookup(new long[] {2, 99}), 0f);
      assertEquals(1, serving.misses());
    }
    try {
      Embedding.open(new File(dir, "missing.hbe").getPath());
      fail("missing file opened");
    } catch (HbException e) {
      assertTrue(e.detail(), e.detail().contains("missing.hbe"));
    }
  }

  @Test
  public void embeddingLifecycle() throws Exception {
    // min_count 2 (default 0.5 until admitted), max_rows 2 (LRU).
    EmbeddingLifecycle life = new EmbeddingLifecycle()
        .admission(Hb.HB_ADMIT_COUNT, 2).defaultValue(0.5f).maxRows(2, Hb.HB_SCORE_LRU);
    try (Context ctx = worldOfOne();
         Embedding emb = Embedding.create(ctx, new EmbeddingConfig("life", 2)
             .optimizer(Hb.HB_OPT_SGD, 1.0).lifecycle(life))) {
      float[] g = {1, 1};
      for (int i = 0; i < 2; ++i) {
        assertArrayEquals(new float[] {0.5f, 0.5f}, emb.lookup(new long[] {7}), 0f);
        emb.applyGradients(new long[] {7}, g);
      }
      assertArrayEquals(new float[] {-1, -1}, emb.lookup(new long[] {7}), 0f);
      for (long id = 1; id <= 3; ++id) {
        emb.applyGradients(new long[] {id}, g);
        emb.applyGradients(new long[] {id}, g);
      }
      long[] st = emb.lifecycleStats();
      assertEquals(8, st[0]);  // step
      assertEquals(2, st[1]);  // rows
      assertEquals(4, st[3]);  // admitted
      assertEquals(4, st[4]);  // dropped
      assertEquals(2, st[7]);  // evicted by capacity
      assertArrayEquals(new float[] {0.5f, 0.5f}, emb.lookup(new long[] {7}), 0f);
    }
    try (Context ctx = worldOfOne();
         Embedding plain = Embedding.create(ctx, new EmbeddingConfig("plain", 2))) {
      plain.lifecycleStats();
      fail("stats of a table without a lifecycle");
    } catch (HbException e) {
      assertTrue(e.detail(), e.detail().contains("no lifecycle"));
    }
  }

  @Test
  public void collectionMatchesSingleTableCalls() throws Exception {
    try (Context ctx = worldOfOne();
         Embedding a = Embedding.create(ctx, new EmbeddingConfig("ja", 2).optimizer(Hb.HB_OPT_SGD, 0.5));
         Embedding b = Embedding.create(ctx, new EmbeddingConfig("jb", 1).optimizer(Hb.HB_OPT_SGD, 0.5));
         Collection c = Collection.create(ctx, new Embedding[] {a, b, a},
             new int[] {Hb.HB_POOLING_SUM, Hb.HB_POOLING_MEAN, Hb.HB_POOLING_NONE})) {
      assertEquals(3, c.pooledWidth());
      // B = 2: feature 0 bags {4, 2}, {}; feature 1 {7}, {7, 8}; feature 2 {4}, {5}.
      long[] values = {4, 2, 7, 7, 8, 4, 5};
      long[] offsets = {0, 2, 2, 3, 5, 6, 7};
      float[] out = new float[6];
      float[] unpooled = new float[4];
      c.lookup(values, offsets, null, out, unpooled);
      assertArrayEquals(new float[6], out, 0f);
      float[] grad = {1, 2, 4, 0, 0, 8};
      c.applyGradients(values, offsets, null, grad, new float[] {1, 1, 1, 1});
      // a: id 4 gets (1, 2) + (1, 1), id 2 (1, 2), id 5 (1, 1); b: id 7 gets 4 + 8 / 2, id 8 8 / 2.
      assertArrayEquals(new float[] {-1, -1.5f, -0.5f, -1, -0.5f, -0.5f},
                        a.lookup(new long[] {4, 2, 5}), 0f);
      assertArrayEquals(new float[] {-4, -2}, b.lookup(new long[] {7, 8}), 0f);
      long[] st = c.stats();
      assertEquals(1, st[2]);  // the update reused the lookup's plan
      assertEquals(4, st[3]);  // rounds
      try {
        c.lookup(values, new long[] {0, 1}, null);
        fail("bad offsets accepted");
      } catch (IllegalArgumentException e) {
        assertTrue(e.getMessage(), e.getMessage().contains("offsets"));
      }
      // The dense sum in the update (world 1: a copy), the plan reused.
      c.lookup(values, offsets, null, out, unpooled);
      float[] dense = {1.5f, -2, 1e8f};
      float[] denseOut = new float[3];
      c.applyGradients(values, offsets, null, grad, new float[] {1, 1, 1, 1}, dense, denseOut);
      assertArrayEquals(dense, denseOut, 0f);
      assertEquals(2, c.stats()[2]);
      try {
        c.applyGradients(values, offsets, null, grad, new float[] {1, 1, 1, 1}, dense, new float[2]);
        fail("a short denseOut accepted");
      } catch (IllegalArgumentException e) {
        assertTrue(e.getMessage(), e.getMessage().contains("denseOut"));
      }
    }
  }

  @Test
  public void listenersAroundSaveAndLoad() throws Exception {
    String ckpt = new File(Files.createTempDirectory("hbjava").toFile(), "ckpt").getPath();
    java.util.List<String> events = new java.util.ArrayList<>();
    try (Context ctx = worldOfOne()) {
      ctx.addListener(Hb.HB_EVENT_BEFORE_SAVE, (e, p) -> events.add(e + ":" + p));
      ctx.addListener(Hb.HB_EVENT_AFTER_LOAD, (e, p) -> events.add(e + ":" + p));
      ctx.addListener(Hb.HB_EVENT_AFTER_SAVE, (e, p) -> {
        throw new RuntimeException("printed, not propagated");
      });
      try {
        ctx.addListener(42, (e, p) -> { });
        fail("event 42 accepted");
      } catch (HbException e) {
        assertEquals(Hb.HB_ERR_INVALID_ARGUMENT, e.status());
      }
      try (Embedding emb = Embedding.create(ctx, new EmbeddingConfig("saved", 2).optimizer(Hb.HB_OPT_SGD, 1))) {
        long[] ids = {3};
        emb.applyGradients(ids, new float[] {1, 1});
        emb.save(ckpt);
        emb.applyGradients(ids, new float[] {1, 1});
        emb.load(ckpt);
        assertArrayEquals(new float[] {-1, -1}, emb.lookup(ids), 0f);
      }
    }
    assertEquals(java.util.Arrays.asList(Hb.HB_EVENT_BEFORE_SAVE + ":" + ckpt, Hb.HB_EVENT_AFTER_LOAD + ":" + ckpt),
        events);
  }
}
