#include "rendezvous/protocol.h"

#include "abi/error.h"

namespace hb {
namespace rdv {
namespace {

struct Shape {
  const char *name;
  size_t ints;
  size_t strs;
  bool more_strs;  // strs is a minimum
};

const Shape *shape_of(uint8_t type) {
  static const Shape kShapes[] = {
      {"HELLO", 2, 1, false},     {"SET", 0, 2, false},
      {"GET", 1, 1, false},       {"ADD", 1, 1, false},
      {"WAIT", 1, 0, true},       {"BARRIER", 1, 1, false},
      {"HEARTBEAT", 0, 0, false}, {"ABORT", 0, 1, false},
      {"BYE", 0, 0, false},       {"REPLY", 2, 1, false},
      {"PEER_LOST", 1, 1, false}, {"ABORTED", 1, 1, false},
      {"PEER_LEFT", 1, 0, false},
  };
  if (type < kHello || type > kPeerLeft) return nullptr;
  return &kShapes[type - kHello];
}

}  // namespace

const char *msg_type_name(uint8_t type) {
  const Shape *s = shape_of(type);
  return s ? s->name : "UNKNOWN";
}

void check_frame_shape(const Frame &frame, uint64_t offset) {
  const Shape *s = shape_of(frame.type);
  if (!s)
    fail(HB_ERR_CORRUPT,
         "malformed rendezvous frame at stream byte offset %llu: unknown "
         "message type %u",
         static_cast<unsigned long long>(offset), frame.type);
  bool strs_ok = s->more_strs ? frame.strs.size() >= s->strs
                              : frame.strs.size() == s->strs;
  if (frame.ints.size() != s->ints || !strs_ok)
    fail(HB_ERR_CORRUPT,
         "malformed rendezvous frame at stream byte offset %llu: %s needs %zu "
         "ints and %s%zu strings, got %zu and %zu",
         static_cast<unsigned long long>(offset), s->name, s->ints,
         s->more_strs ? "at least " : "", s->strs, frame.ints.size(),
         frame.strs.size());
}

void check_link_config(const char *who, int64_t heartbeat_interval_ms,
                       int64_t peer_timeout_ms, size_t max_frame_bytes) {
  if (heartbeat_interval_ms <= 0 || peer_timeout_ms <= 0 ||
      heartbeat_interval_ms > peer_timeout_ms / 2)
    fail(HB_ERR_CONFIG,
         "%s: heartbeat_interval_ms (%lld) must be positive and at most half "
         "of peer_timeout_ms (%lld)",
         who, static_cast<long long>(heartbeat_interval_ms),
         static_cast<long long>(peer_timeout_ms));
  if (max_frame_bytes < 256)
    fail(HB_ERR_CONFIG, "%s: max_frame_bytes %zu is below 256", who,
         max_frame_bytes);
}

Frame make_reply(uint64_t id, hb_status status, std::string text,
                 int64_t value) {
  Frame f;
  f.type = kReply;
  f.id = id;
  f.ints = {static_cast<int64_t>(status), value};
  f.strs.push_back(std::move(text));
  return f;
}

}  // namespace rdv
}  // namespace hb
