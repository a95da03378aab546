package org.hb;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.File;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import org.junit.Test;

/** Job checkpoints from Java (ctest java_checkpoint). */
public class CheckpointTest {
  @Test
  public void saveRestoreAndLatest() throws Exception {
    File dir = Files.createTempDirectory("hb_java_ckpt").toFile();
    assertNull(Checkpoint.latest(dir.getPath() + "/none").path);
    assertEquals(-1, Checkpoint.latest(dir.getPath()).step);
    try (Context ctx = Context.create(new ContextOptions().rank(0).worldSize(1));
         Embedding t = Embedding.create(ctx, new EmbeddingConfig("jt", 4).numRows(10));
         Checkpoint c = Checkpoint.create(ctx, new Checkpoint.Config().dir(dir.getPath()).jobId("java"))) {
      ByteBuffer w = ByteBuffer.allocateDirect(16).order(ByteOrder.nativeOrder());
      w.asFloatBuffer().put(new float[] {1, 2, 3, 4});
      c.addTable(t);
      c.addBuffer("w", w, false);
      assertEquals(-1, c.restoreLatest());
      long[] ids = {1, 7};
      t.applyGradients(ids, new float[] {1, 1, 1, 1, 2, 2, 2, 2});
      float[] rows = t.lookup(ids);
      c.setMeta("k", "v");
      c.save(5);
      c.awaitCommit();
      t.applyGradients(ids, new float[] {9, 9, 9, 9, 9, 9, 9, 9});
      w.asFloatBuffer().put(new float[] {0, 0, 0, 0});
      Checkpoint.Latest l = Checkpoint.latest(dir.getPath());
      assertEquals(5, l.step);
      assertTrue(l.path.contains("ckpt-000000000005-"));
      assertEquals(5, c.restoreLatest());
      assertArrayEquals(rows, t.lookup(ids), 0f);
      float[] back = new float[4];
      w.asFloatBuffer().get(back);
      assertArrayEquals(new float[] {1, 2, 3, 4}, back, 0f);
      assertEquals("v", c.getMeta("k"));
      assertEquals(l.path, c.restoredPath());
      try {
        c.addBuffer("heap", ByteBuffer.allocate(8), false);
        fail("a heap buffer was accepted");
      } catch (IllegalArgumentException expected) {
      }
    }
  }
}
