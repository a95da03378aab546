// By hand, not built by CMake: Gloo's own bug behind the LeakSanitizer leak
// that comm_connect_kill_test showed (CHANGELOG, "Gloo's TCP pair no longer
// writes into freed buffers"), with Gloo alone (Debian 12's libgloo-dev
// 0.0~git20220518.5b14351; upstream's master of 2025-05 has the same code).
// A pinned send buffer destroyed while its send is queued in the pair's
// transmit queue stays there as a raw pointer (gloo/transport/tcp/pair.h,
// `Op::buf`; `Buffer::~Buffer` in buffer.cc only unregisters it); when the
// connection then breaks, the loop thread's `Pair::signalException`
// (pair.cc, "Loop through posted send operations") calls
// `op.buf->signalException(ex)` on the freed buffer, which stores the
// exception there. libgloo is not instrumented: ASan reports no use after
// free, LeakSanitizer the 247-byte exception referenced only from freed
// memory, every run. Keeping the buffer until after the break: no leak.
//
//   g++ -std=c++17 -g -fsanitize=address tests/comm/gloo_queued_send_repro.cc \
//     -lgloo -o /tmp/gloo_queued_send_repro
//   ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0
//   /tmp/gloo_queued_send_repro
//
// hb's pairs (comm/tcp_pair.cc) fail the pair and drop the pointer when
// such a buffer goes.
#include <gloo/transport/buffer.h>
#include <gloo/transport/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/device.h>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

int main() {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  auto ctx0 = dev->createContext(0, 2), ctx1 = dev->createContext(1, 2);
  ctx0->setTimeout(std::chrono::seconds(5));
  ctx1->setTimeout(std::chrono::seconds(5));
  auto &p0 = ctx0->createPair(1);
  auto &p1 = ctx1->createPair(0);
  const auto a0 = p0->address().bytes(), a1 = p1->address().bytes();
  std::thread t([&] { p0->connect(a1); });
  p1->connect(a0);
  t.join();
  // Rank 0 registers no buffer for slot 7: its loop leaves the bytes in the
  // socket, and a send larger than both socket buffers stays in p1's tx_.
  std::vector<char> data(32 << 20, 'x');
  auto send = p1->createSendBuffer(7, data.data(), data.size());
  send->send();
  send.reset();  // Gloo's ~Buffer does not remove the queued op
  ctx0.reset();  // rank 0 closes: p1 reads EOF -> signalException(tx_ ops)
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::printf("done\n");
  return 0;
}
