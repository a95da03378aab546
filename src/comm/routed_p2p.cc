#include "comm/routed_p2p.h"

#include <atomic>
#include <exception>
#include <thread>

#include "comm/shm_transport.h"

namespace hb {
namespace comm {

RoutedP2P::RoutedP2P(const ShmTransport &t, ShmP2P &shm, P2P &tcp)
    : t_(t), shm_(shm), tcp_(tcp) {}

int RoutedP2P::send(int peer, int channel, const void *data, size_t bytes) {
  const bool shm = t_.reaches(peer);
  ops_.emplace_back(shm, shm ? shm_.send(peer, channel, data, bytes)
                             : tcp_.send(peer, channel, data, bytes));
  return int(ops_.size()) - 1;
}

int RoutedP2P::recv(int peer, int channel, void *data, size_t bytes) {
  const bool shm = t_.reaches(peer);
  ops_.emplace_back(shm, shm ? shm_.recv(peer, channel, data, bytes)
                             : tcp_.recv(peer, channel, data, bytes));
  return int(ops_.size()) - 1;
}

void RoutedP2P::wait_tcp(int sub) {
  if (shm_.idle()) return tcp_.wait(sub);
  std::atomic<bool> stop{false};
  std::exception_ptr err;
  std::thread helper([&] {
    try {
      shm_.pump(stop);
    } catch (...) {
      err = std::current_exception();
    }
  });
  struct Join {
    std::thread &t;
    std::atomic<bool> &stop;
    const ShmTransport &tr;
    ~Join() {
      stop.store(true);
      const_cast<ShmTransport &>(tr).wake_self();
      t.join();
    }
  };
  {
    Join join{helper, stop, t_};
    tcp_.wait(sub);
  }
  if (err) std::rethrow_exception(err);
}

void RoutedP2P::wait(int id) {
  const auto &op = ops_.at(size_t(id));
  if (op.first)
    shm_.wait(op.second);
  else
    wait_tcp(op.second);
}

void RoutedP2P::finish() {
  // TCP operations progress on Gloo's own thread meanwhile.
  shm_.finish();
  tcp_.finish();
}

}  // namespace comm
}  // namespace hb
