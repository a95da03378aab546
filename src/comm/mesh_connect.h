// A Gloo context whose full-mesh connect can be broken from another thread.
// Gloo's own connectFullMesh waits for each peer in Pair::connect for up to
// five times the context timeout, and its pairs are out of reach until it
// returns: a rank killed or stopped while the mesh forms left the others
// there long after the rendezvous had reported it lost. This one does the
// same exchange through the same store, but keeps the pairs reachable, so a
// health failure (a lost peer, an abort) ends the connect at once.
#pragma once

#include <gloo/rendezvous/context.h>

#include <memory>
#include <mutex>
#include <string>

namespace hb {
namespace comm {

class MeshContext : public gloo::rendezvous::Context {
 public:
  MeshContext(int rank, int size) : gloo::rendezvous::Context(rank, size) {}

  // gloo::rendezvous::Context::connectFullMesh, breakable: throws what Gloo
  // throws, or gloo::IoException carrying `why` once break_connect ran.
  void connect_mesh(gloo::rendezvous::Store &store,
                    std::shared_ptr<gloo::transport::Device> &dev);
  // Thread-safe; a no-op once the mesh is connected.
  void break_connect(const std::string &why);

 private:
  std::mutex mu_;
  std::shared_ptr<gloo::transport::Context> connecting_;
  bool broken_ = false;
  std::string why_;
};

}  // namespace comm
}  // namespace hb
