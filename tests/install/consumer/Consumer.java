// A Java program using hb from an installed tree: hb.jar on the class
// path, the directory of libhb_jni.so on java.library.path.
// java Consumer PREFIX: also checks that libhb came from PREFIX.
import java.nio.file.Files;
import java.nio.file.Paths;
import org.hb.Context;
import org.hb.Hb;

public class Consumer {
  public static void main(String[] args) throws Exception {
    String prefix = Paths.get(args[0]).toRealPath().toString() + "/";
    try (Context ctx = Context.create()) {
      float[] x = {1, 2, 3, 4};
      ctx.allreduce(x, x, Hb.HB_SUM);
      if (ctx.worldSize() != 1 || x[3] != 4.0f) {
        throw new AssertionError("unexpected allreduce result " + x[3]);
      }
      // libhb_jni.so and the libhb.so.0 it found through its RUNPATH.
      for (String line : Files.readAllLines(Paths.get("/proc/self/maps"))) {
        if (line.contains("libhb") && !line.contains(" " + prefix)) {
          throw new AssertionError("hb library loaded from outside " + prefix + ": " + line);
        }
      }
      System.out.println("java consumer ok: world " + ctx.worldSize());
    }
  }
}
