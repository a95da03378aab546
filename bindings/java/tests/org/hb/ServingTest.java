package org.hb;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.File;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.Test;

/**
 * Versioned exports and a serving table that follows them from Java: the
 * array and direct-buffer lookups report the version they read, readers on
 * other threads never see two versions in one call while deltas and full
 * exports are applied, and out-of-order or damaged files are refused with
 * the served version intact.
 */
public class ServingTest {
  private static final int N = 100, DIM = 4;

  /** SGD with rate 1 and gradient -1 on every id per version: every float of version v is v. */
  private static void train(Embedding emb, long[] ids) throws HbException {
    float[] grads = new float[N * DIM];
    java.util.Arrays.fill(grads, -1f);
    emb.applyGradients(ids, grads);
  }

  private static boolean allEqual(float[] rows, float v) {
    for (float f : rows) if (f != v) return false;
    return true;
  }

  @Test
  public void followsVersionsUnderLoad() throws Exception {
    File dir = Files.createTempDirectory("hbjserve").toFile();
    long[] ids = new long[N];
    for (int i = 0; i < N; ++i) ids[i] = i * 7 - 50;
    int versions = 12;
    String[] files = new String[versions + 1];
    try (Context ctx = Context.create();
         Embedding emb = Embedding.create(ctx, new EmbeddingConfig("js", DIM).optimizer(Hb.HB_OPT_SGD, 1.0))) {
      for (int v = 1; v <= versions; ++v) {
        train(emb, ids);
        files[v] = new File(dir, "v" + v + ".hbe").getPath();
        emb.exportVersion(files[v], v, v % 5 == 0 || v == 1 ? 0 : v - 1);
      }
      assertEquals(0, emb.lookup(ids, new float[N * DIM]));  // a sharded table has no version
    }
    try (Embedding s = Embedding.open(files[1])) {
      assertEquals(1, s.version());
      assertEquals(DIM, s.dim());
      float[] out = new float[N * DIM];
      assertEquals(1, s.lookup(ids, out));
      assertTrue(allEqual(out, 1f));
      ByteBuffer bids = ByteBuffer.allocateDirect(8 * N).order(ByteOrder.nativeOrder());
      ByteBuffer bout = ByteBuffer.allocateDirect(4 * N * DIM).order(ByteOrder.nativeOrder());
      bids.asLongBuffer().put(ids);
      assertEquals(1, s.lookup(bids, bout));
      float[] viaBuffer = new float[N * DIM];
      bout.asFloatBuffer().get(viaBuffer);
      assertArrayEquals(out, viaBuffer, 0f);

      // Out of order: version 3's delta on version 1.
      try {
        s.update(files[3]);
        fail("out-of-order delta accepted");
      } catch (HbException e) {
        assertEquals(Hb.HB_ERR_INVALID_ARGUMENT, e.status());
        assertTrue(e.detail(), e.detail().contains("delta from version 2"));
      }
      assertEquals(1, s.version());

      // Readers check every call against the version it reports.
      AtomicBoolean stop = new AtomicBoolean();
      AtomicLong mixed = new AtomicLong(), calls = new AtomicLong();
      Thread[] readers = new Thread[3];
      for (int r = 0; r < readers.length; ++r) {
        readers[r] = new Thread(() -> {
          float[] rows = new float[N * DIM];
          try {
            while (!stop.get()) {
              long v = s.lookup(ids, rows);
              if (!allEqual(rows, (float) v)) mixed.incrementAndGet();
              calls.incrementAndGet();
            }
          } catch (HbException e) {
            mixed.addAndGet(1000000);
          }
        });
        readers[r].start();
      }
      for (int v = 2; v <= versions; ++v) {
        s.update(files[v]);
        Thread.sleep(2);
      }
      stop.set(true);
      for (Thread t : readers) t.join();
      assertEquals(0, mixed.get());
      assertTrue(calls.get() > 0);
      assertEquals(versions, s.version());
      assertEquals(versions, s.lookup(ids, out));
      assertTrue(allEqual(out, versions));

      // A damaged file is refused; the served version stays.
      File bad = new File(dir, "bad.hbe");
      byte[] data = Files.readAllBytes(new File(files[versions]).toPath());
      data[data.length / 2] ^= 1;
      Files.write(bad.toPath(), data);
      try {
        s.update(bad.getPath());
        fail("damaged file accepted");
      } catch (HbException e) {
        assertEquals(Hb.HB_ERR_CORRUPT, e.status());
      }
      assertEquals(versions, s.version());

      assertEquals(versions, s.lookup(new long[0], new float[0]));

      // Argument checks happen in Java, before the native call.
      try {
        s.lookup(ids, new float[N * DIM - 1]);
        fail("short out accepted");
      } catch (IllegalArgumentException e) {
        assertTrue(e.getMessage(), e.getMessage().contains("out"));
      }
    }
  }
}
