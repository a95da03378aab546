#include "abi/error.h"
#include "comm/backend.h"
#include "comm/gloo_backend.h"

namespace hb {
namespace comm {

std::shared_ptr<Backend> make_local_backend();  // local_backend.cc

std::shared_ptr<Backend> make_backend(const BackendConfig &cfg, rdv::KV *kv,
                                      Health &health) {
  if (cfg.world_size < 1 || cfg.rank < 0 || cfg.rank >= cfg.world_size)
    fail(HB_ERR_INVALID_ARGUMENT, "communicator: rank %d outside world of %d",
         cfg.rank, cfg.world_size);
  if (cfg.world_size == 1) return make_local_backend();
  if (!kv)
    fail(HB_ERR_INTERNAL, "communicator for %d ranks needs a rendezvous store",
         cfg.world_size);
  return std::make_shared<GlooBackend>(cfg, *kv, health);
}

}  // namespace comm
}  // namespace hb
