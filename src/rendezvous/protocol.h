// The rendezvous protocol on top of frames: message types and the fields
// each one carries. Requests carry a client-chosen id; the server answers
// each with one kReply of the same id. Both ends send kHeartbeat every
// heartbeat interval on their own clock (never as an answer), so either
// side hears from the other even while it is busy sending. kPeerLost and
// kAborted are pushed by the server unasked.
//
//   type        ints                    strs
//   kHello      rank, world_size        token
//   kSet        -                       key, value
//   kGet        timeout_ms              key
//   kAdd        delta                   key
//   kWait       timeout_ms              key...
//   kBarrier    timeout_ms              name
//   kHeartbeat  -                       -
//   kAbort      -                       reason
//   kBye        -                       -
//   kReply      status, int value       text (value, or error message)
//   kPeerLost   rank                    why
//   kAborted    rank                    reason
//   kPeerLeft   rank                    -
//
// kPeerLeft tells the others that a rank which had taken part in a context
// (passed a barrier) said BYE: it left on purpose, and a broken connection
// to it is a clean leave, not a failure to wait for.
// A kReply with id 0 and an error status is the server's last word before
// it closes the connection (malformed frame, protocol violation).
#pragma once

#include <cstdint>
#include <string>

#include "hb.h"
#include "rendezvous/frame.h"

namespace hb {
namespace rdv {

enum MsgType : uint8_t {
  kHello = 1,
  kSet,
  kGet,
  kAdd,
  kWait,
  kBarrier,
  kHeartbeat,
  kAbort,
  kBye,
  kReply,
  kPeerLost,
  kAborted,
  kPeerLeft,
};

const char *msg_type_name(uint8_t type);

// Throws HB_ERR_CORRUPT if the type is unknown or the frame does not carry
// the fields its type needs; `offset` is its stream offset, for the message.
void check_frame_shape(const Frame &frame, uint64_t offset);

// Settings both ends share. Heartbeats must come well within the peer
// timeout, or every rank would be declared lost: HB_ERR_CONFIG naming both
// unless 0 < interval <= peer timeout / 2. max_frame_bytes below 256 is
// HB_ERR_CONFIG too. `who` starts the messages.
void check_link_config(const char *who, int64_t heartbeat_interval_ms,
                       int64_t peer_timeout_ms, size_t max_frame_bytes);

Frame make_reply(uint64_t id, hb_status status, std::string text,
                 int64_t value = 0);

}  // namespace rdv
}  // namespace hb
