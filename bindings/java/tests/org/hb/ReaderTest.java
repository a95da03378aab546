package org.hb;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import org.junit.Test;

/** The Java reader (ctest java_reader): values, sharding, errors. */
public class ReaderTest {
  private static List<String> lines(int n) {
    List<String> out = new ArrayList<>();
    for (int i = 0; i < n; ++i) {
      StringBuilder s = new StringBuilder(Integer.toString(i % 2));
      for (int j = 0; j < 13; ++j) s.append('\t').append(j % 3 == 0 ? "" : Integer.toString(i * j));
      s.append('\t').append(Integer.toHexString(i));  // serial
      for (int f = 1; f < 26; ++f) s.append('\t').append(f % 4 == 0 ? "" : Integer.toHexString(i * 31 + f));
      out.add(s.toString());
    }
    return out;
  }

  private static File write(List<String> lines) throws Exception {
    File f = File.createTempFile("hb_reader", ".tsv");
    f.deleteOnExit();
    Files.write(f.toPath(), (String.join("\n", lines) + "\n").getBytes(StandardCharsets.UTF_8));
    return f;
  }

  @Test
  public void valuesMatchTheText() throws Exception {
    List<String> text = lines(100);
    File f = write(text);
    try (Reader r = Reader.create(null, new String[] {f.getPath()}, new Reader.Config().batchSize(32))) {
      int seen = 0;
      for (Reader.Batch b = r.next(); b != null; b = r.next()) {
        assertEquals(13, b.numDense);
        assertEquals(26, b.numSparse);
        for (int i = 0; i < b.size; ++i) {
          String[] fields = text.get(seen + i).split("\t", -1);
          assertEquals(Float.parseFloat(fields[0]), b.labels[i], 0.0f);
          for (int j = 0; j < 13; ++j) {
            float want = fields[1 + j].isEmpty() ? 0.0f : Float.parseFloat(fields[1 + j]);
            assertEquals(want, b.dense[i * 13 + j], 0.0f);
          }
          for (int k = 0; k < 26; ++k) {
            long lo = b.offsets[k * b.size + i], hi = b.offsets[k * b.size + i + 1];
            String h = fields[14 + k];
            assertEquals(h.isEmpty() ? 0 : 1, hi - lo);
            if (!h.isEmpty()) assertEquals(Long.parseLong(h, 16), b.ids[(int) lo]);
          }
        }
        seen += b.size;
      }
      assertEquals(100, seen);
      assertEquals(100, r.lines());
      assertEquals(1, r.numFiles());
    }
  }

  @Test
  public void shardsReadEveryLineOnce() throws Exception {
    File f = write(lines(257));
    for (int world = 1; world <= 4; ++world) {
      boolean[] seen = new boolean[257];
      for (int rank = 0; rank < world; ++rank) {
        Reader.Config c = new Reader.Config().batchSize(10).shard(rank, world).chunkBytes(500);
        try (Reader r = Reader.create(null, new String[] {f.getPath()}, c)) {
          for (Reader.Batch b = r.next(); b != null; b = r.next())
            for (int i = 0; i < b.size; ++i) {
              int serial = (int) b.ids[(int) b.offsets[i]];
              assertTrue("line read twice", !seen[serial]);
              seen[serial] = true;
            }
        }
      }
      for (boolean s : seen) assertTrue(s);
    }
  }

  @Test
  public void badLinesAndMissingFilesThrow() throws Exception {
    List<String> text = lines(5);
    text.set(2, text.get(2).replaceFirst("\t", "\tx"));
    File f = write(text);
    try (Reader r = Reader.create(null, new String[] {f.getPath()}, null)) {
      r.next();
      fail("a malformed line was accepted");
    } catch (HbException e) {
      assertEquals(Hb.HB_ERR_CORRUPT, e.status());
      assertTrue(e.detail(), e.detail().contains(f.getPath() + ": line 3, column 2"));
    }
    try (Reader r = Reader.create(null, new String[] {f.getPath()}, new Reader.Config().skipBadLines(true))) {
      Reader.Batch b = r.next();
      assertEquals(4, b.size);
      assertNull(r.next());
      assertEquals(1, r.skippedLines());
    }
    try {
      Reader.create(null, new String[] {"/nonexistent/hb/x.tsv"}, null);
      fail("a missing file was accepted");
    } catch (HbException e) {
      assertEquals(Hb.HB_ERR_IO, e.status());
      assertTrue(e.detail().contains("/nonexistent/hb/x.tsv"));
    }
  }
}
