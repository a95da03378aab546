package org.hb;

/**
 * Explicit cluster settings (hb_context_options). Unset fields mean
 * "discover": hbrun's HB_* variables, then TF_CONFIG, then a world of one.
 */
public final class ContextOptions {
  private static final hb_context_options DEFAULTS = new hb_context_options();

  private int rank = DEFAULTS.getRank();
  private int worldSize = DEFAULTS.getWorld_size();
  private int localRank = DEFAULTS.getLocal_rank();
  private int localWorldSize = DEFAULTS.getLocal_world_size();
  private String rendezvous;
  private String options;

  public ContextOptions rank(int v) { rank = v; return this; }
  public ContextOptions worldSize(int v) { worldSize = v; return this; }
  public ContextOptions localRank(int v) { localRank = v; return this; }
  public ContextOptions localWorldSize(int v) { localWorldSize = v; return this; }
  /** "host:port" of the rendezvous store. */
  public ContextOptions rendezvous(String v) { rendezvous = v; return this; }
  /** Option assignments, "name=value,name=value". */
  public ContextOptions options(String v) { options = v; return this; }

  hb_context_options toNative() {
    hb_context_options o = new hb_context_options();
    o.setRank(rank);
    o.setWorld_size(worldSize);
    o.setLocal_rank(localRank);
    o.setLocal_world_size(localWorldSize);
    o.setRendezvous(rendezvous);
    o.setOptions(options);
    return o;
  }
}
