package org.hb;

/**
 * An allreduce in flight ({@link Context#allreduceStart}, hb_allreduce_start).
 * Call {@link #waitFor} once; {@link #close} waits when that was not done.
 * The request holds the send and recv buffers until then: the library reads
 * and writes their memory on its progress thread.
 */
public final class AllreduceRequest implements AutoCloseable {
  private long handle;
  private Object send, recv;

  AllreduceRequest(long handle, Object send, Object recv) {
    this.handle = handle;
    this.send = send;
    this.recv = recv;
  }

  /** True once waitFor() has returned (or thrown anything but HB_ERR_TIMEOUT). */
  public boolean done() { return handle == 0; }

  /**
   * Waits until recv holds the result (hb_allreduce_wait). Throws the
   * allreduce's failure (e.g. HB_ERR_PEER_FAILED); after HB_ERR_TIMEOUT it is
   * still in flight: wait again.
   */
  public void waitFor() throws HbException {
    if (handle == 0) throw new IllegalStateException("AllreduceRequest.waitFor: already waited for");
    try {
      HbNative.hb_allreduce_wait(handle);
    } catch (HbException e) {
      if (e.status() != Hb.HB_ERR_TIMEOUT) release();
      throw e;
    }
    release();
  }

  private void release() {
    handle = 0;
    send = null;
    recv = null;
  }

  @Override
  public void close() throws HbException {
    if (handle != 0) waitFor();
  }
}
