package org.hb;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/** Checks of buffer arguments: primitive arrays or direct, native-order ByteBuffers. */
final class Buffers {
  private Buffers() {}

  /** The hb dtype of a primitive array; ByteBuffers and short[] need an explicit one. */
  static int dtypeOf(Object buf, String param) {
    if (buf instanceof float[]) return Hb.HB_FLOAT32;
    if (buf instanceof double[]) return Hb.HB_FLOAT64;
    if (buf instanceof int[]) return Hb.HB_INT32;
    if (buf instanceof long[]) return Hb.HB_INT64;
    if (buf instanceof byte[]) return Hb.HB_UINT8;
    if (buf instanceof short[] || buf instanceof ByteBuffer) {
      throw new IllegalArgumentException(param + ": " + typeName(buf)
          + " does not say its dtype: pass one (e.g. Hb.HB_FLOAT16)");
    }
    throw new IllegalArgumentException(param + ": expected a primitive array or a direct ByteBuffer, got "
        + typeName(buf));
  }

  /** Elements of dtype that buf holds; throws when buf cannot hold dtype. */
  static long elements(Object buf, int dtype, String param) {
    long size = HbNative.hb_dtype_size(dtype);
    if (size == 0) throw new IllegalArgumentException(param + ": unknown dtype " + dtype);
    if (buf instanceof ByteBuffer) {
      ByteBuffer b = (ByteBuffer) buf;
      if (!b.isDirect()) {
        throw new IllegalArgumentException(param + ": the ByteBuffer is not direct (use ByteBuffer.allocateDirect)");
      }
      if (b.order() != ByteOrder.nativeOrder()) {
        throw new IllegalArgumentException(param + ": the ByteBuffer must use ByteOrder.nativeOrder()");
      }
      if (b.capacity() % size != 0) {
        throw new IllegalArgumentException(param + ": " + b.capacity() + " bytes is not a whole number of "
            + size + "-byte elements");
      }
      return b.capacity() / size;
    }
    long itemSize = itemSize(buf);
    if (itemSize == 0) {
      throw new IllegalArgumentException(param + ": expected a primitive array or a direct ByteBuffer, got "
          + typeName(buf));
    }
    if (itemSize != size || (buf instanceof short[]) != (dtype == Hb.HB_FLOAT16 || dtype == Hb.HB_BFLOAT16)) {
      throw new IllegalArgumentException(param + ": " + typeName(buf) + " cannot hold dtype " + dtype);
    }
    return java.lang.reflect.Array.getLength(buf);
  }

  /** Throws unless buf holds at least want elements. */
  static void require(Object buf, int dtype, long want, String param) {
    long have = elements(buf, dtype, param);
    if (have < want) {
      throw new IllegalArgumentException(param + ": needs " + want + " elements, has " + have);
    }
  }

  /** Elements a counts/offsets layout spans (offsets null: packed). */
  static long extent(long[] counts, long[] offsets, int world, String param) {
    if (counts == null || counts.length != world) {
      throw new IllegalArgumentException(param + ": expected " + world + " counts, one per rank");
    }
    if (offsets != null && offsets.length != world) {
      throw new IllegalArgumentException(param + ": expected " + world + " offsets, one per rank");
    }
    long extent = 0;
    for (int i = 0; i < world; ++i) {
      extent = offsets == null ? extent + counts[i] : Math.max(extent, offsets[i] + counts[i]);
    }
    return extent;
  }

  private static long itemSize(Object buf) {
    if (buf instanceof float[] || buf instanceof int[]) return 4;
    if (buf instanceof double[] || buf instanceof long[]) return 8;
    if (buf instanceof short[]) return 2;
    if (buf instanceof byte[]) return 1;
    return 0;
  }

  private static String typeName(Object buf) {
    return buf == null ? "null" : buf.getClass().getSimpleName();
  }
}
