#include "ps/wire.h"

namespace hb {
namespace ps {
namespace {

// Fixed-order field list of a spec: ints then doubles, then the name.
struct SpecFields {
  int64_t ints[8];
  double reals[10];
};

}  // namespace

std::string encode_spec(const emb::Spec &s) {
  SpecFields f;
  int64_t ints[8] = {s.dim,
                     s.num_rows,
                     s.partition,
                     s.initializer,
                     s.optimizer,
                     s.wire_dtype,
                     static_cast<int64_t>(s.seed),
                     s.device};
  double reals[10] = {
      s.init_a, s.init_b,  s.learning_rate, s.initial_accumulator,
      s.beta1,  s.beta2,   s.epsilon,       s.l1,
      s.l2,     s.lr_power};
  std::memcpy(f.ints, ints, sizeof ints);
  std::memcpy(f.reals, reals, sizeof reals);
  return std::string(reinterpret_cast<const char *>(&f), sizeof f) + s.name;
}

emb::Spec decode_spec(const std::string &bytes) {
  SpecFields f;
  if (bytes.size() <= sizeof f || bytes.size() > sizeof f + 128)
    fail(HB_ERR_CORRUPT, "ps message: a table spec of %zu bytes", bytes.size());
  std::memcpy(&f, bytes.data(), sizeof f);
  emb::Spec s;
  s.name = bytes.substr(sizeof f);
  s.dim = f.ints[0];
  s.num_rows = f.ints[1];
  s.partition = static_cast<int32_t>(f.ints[2]);
  s.initializer = static_cast<int32_t>(f.ints[3]);
  s.optimizer = static_cast<int32_t>(f.ints[4]);
  s.wire_dtype = static_cast<hb_dtype>(f.ints[5]);
  s.seed = static_cast<uint64_t>(f.ints[6]);
  s.device = static_cast<int32_t>(f.ints[7]);
  s.init_a = f.reals[0], s.init_b = f.reals[1], s.learning_rate = f.reals[2];
  s.initial_accumulator = f.reals[3], s.beta1 = f.reals[4];
  s.beta2 = f.reals[5], s.epsilon = f.reals[6], s.l1 = f.reals[7];
  s.l2 = f.reals[8], s.lr_power = f.reals[9];
  if (s.dim <= 0 || s.dim > (1 << 20) || s.num_rows < 0 ||
      s.optimizer < HB_OPT_SGD || s.optimizer > HB_OPT_FTRL ||
      s.initializer < HB_INIT_ZEROS || s.initializer > HB_INIT_NORMAL ||
      (s.wire_dtype != HB_FLOAT32 && s.wire_dtype != HB_FLOAT16 &&
       s.wire_dtype != HB_BFLOAT16))
    fail(HB_ERR_CORRUPT, "ps message: table spec of '%s' out of range",
         s.name.c_str());
  return s;
}

Frame request(MsgType type, std::vector<int64_t> ints,
              std::vector<std::string> strs) {
  Frame f;
  f.type = type;
  f.ints = std::move(ints);
  f.strs = std::move(strs);
  return f;
}

Frame ok_reply(uint64_t id, std::vector<int64_t> ints,
               std::vector<std::string> strs) {
  Frame f;
  f.type = kReply;
  f.id = id;
  f.ints.reserve(ints.size() + 1);
  f.ints.push_back(HB_OK);
  f.ints.insert(f.ints.end(), ints.begin(), ints.end());
  f.strs.reserve(strs.size() + 1);
  f.strs.emplace_back();
  for (std::string &s : strs) f.strs.push_back(std::move(s));
  return f;
}

Frame error_reply(uint64_t id, hb_status st, const std::string &message) {
  Frame f;
  f.type = kReply;
  f.id = id;
  f.ints = {st};
  f.strs = {message};
  return f;
}

}  // namespace ps
}  // namespace hb
