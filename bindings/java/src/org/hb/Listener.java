package org.hb;

/**
 * Called around checkpoint saves and loads (Hb.HB_EVENT_*), on the thread of
 * the save or load, on every rank. Exceptions it throws are printed, not
 * propagated: they cannot cross the C library.
 */
@FunctionalInterface
public interface Listener {
  void onEvent(int event, String path);
}
