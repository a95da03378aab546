package org.hb;

/** One C handle: handle() while open, close() frees it once. */
abstract class NativeHandle implements AutoCloseable {
  private long handle;

  NativeHandle(long handle) { this.handle = handle; }

  final long handle() {
    if (handle == 0) throw new IllegalStateException(getClass().getSimpleName() + " is closed");
    return handle;
  }

  /** Frees the handle (not collective); closing twice is fine. */
  @Override
  public final void close() {
    if (handle != 0) {
      long h = handle;
      handle = 0;
      destroy(h);
    }
  }

  abstract void destroy(long h);
}
