#include "comm/mesh_connect.h"

#include "comm/tcp_pair.h"

#include <gloo/common/error.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/pair.h>

#include <string>
#include <vector>

namespace hb {
namespace comm {

void MeshContext::connect_mesh(gloo::rendezvous::Store &store,
                               std::shared_ptr<gloo::transport::Device> &dev) {
  // TcpPairs: a peer killed while they connect fails them, not the process.
  std::shared_ptr<gloo::transport::Context> tctx =
      make_tcp_context(dev, rank, size);
  tctx->setTimeout(getTimeout());
  std::vector<char> mine;
  for (int i = 0; i < size; ++i) {
    if (i == rank) continue;
    std::vector<char> b = tctx->createPair(i)->address().bytes();
    mine.insert(mine.end(), b.begin(), b.end());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) throw gloo::IoException(why_);
    connecting_ = tctx;
  }
  store.set(std::to_string(rank), mine);
  for (int i = 0; i < size; ++i) {
    if (i == rank) continue;
    std::string key = std::to_string(i);
    store.wait({key}, getTimeout());
    std::vector<char> all = store.get(key);
    std::vector<char> addr = extractAddress(all, i);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (broken_) throw gloo::IoException(why_);
    }
    tctx->getPair(i)->connect(addr);
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) throw gloo::IoException(why_);
  }
  std::lock_guard<std::mutex> lock(mu_);
  connecting_.reset();
  if (broken_) throw gloo::IoException(why_);
  device_ = dev;
  transportContext_ = std::move(tctx);
}

void MeshContext::break_connect(const std::string &why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_) return;
  broken_ = true;
  why_ = why;
  if (!connecting_) return;
  // Closing a pair wakes a Pair::connect waiting for its peer (it waits
  // for "connected or later"); connect_mesh then throws `why`.
  for (int i = 0; i < size; ++i) {
    if (i == rank) continue;
    auto &pair = connecting_->getPair(i);
    if (pair) pair->close();
  }
}

}  // namespace comm
}  // namespace hb
