// The data-movement collectives written once against P2P (comm/p2p.h), so
// they run over shared memory, TCP, or both (comm/routed_p2p.h): every
// receive is posted first, then every send, peers in a rotated order so
// that no rank is everyone's first target. Counts are consistent across
// ranks when these run (the call's fingerprint was checked).
#pragma once

#include <cstddef>
#include <cstdint>

namespace hb {
namespace comm {

class P2P;

// Blocks of es-byte elements at offsets (in elements) of send / recv. No
// block of recv may overlap send (the caller stages an overlapping input).
void p2p_alltoallv(P2P &p2p, int channel, const char *send,
                   const int64_t *send_counts, const int64_t *send_offsets,
                   char *recv, const int64_t *recv_counts,
                   const int64_t *recv_offsets, size_t es);

// The blocks of p2p_alltoallv between this rank and the m ranks of group
// only (ascending, this rank at group[me]; peers rotated likewise), and
// its own block copied; posted, not finished (comm/hier_alltoallv.h adds
// messages of its own before the finish).
void p2p_alltoallv_post(P2P &p2p, int channel, const int *group, int m, int me,
                        const char *send, const int64_t *send_counts,
                        const int64_t *send_offsets, char *recv,
                        const int64_t *recv_counts, const int64_t *recv_offsets,
                        size_t es);

// send (send_count elements) lands at recv + recv_offsets[rank]; send may
// be exactly that block, else it must not overlap recv.
void p2p_allgatherv(P2P &p2p, int channel, const char *send, char *recv,
                    const int64_t *recv_counts, const int64_t *recv_offsets,
                    size_t es);

// root's send (bytes) lands in every rank's recv (root: send may overlap
// recv).
void p2p_broadcast(P2P &p2p, int channel, const char *send, char *recv,
                   size_t bytes, int root);

}  // namespace comm
}  // namespace hb
