// A rank in its own process for the liveness tests:
//   rendezvous_test_child PORT RANK WORLD PEER_TIMEOUT_MS HEARTBEAT_MS MODE
// It joins, sets "child/<rank>/ready", then
//   MODE=block: blocks in a get that never completes (until killed);
//   MODE=bye:   waits for key "go", leaves with BYE and exits 0.
// Exit codes: 0 ok, 2 bad usage, 3 an hb error (printed).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "abi/error.h"
#include "common/health.h"
#include "rendezvous/client.h"

int main(int argc, char **argv) {
  if (argc != 7) {
    std::fprintf(
        stderr,
        "usage: %s PORT RANK WORLD PEER_TIMEOUT_MS HEARTBEAT_MS block|bye\n",
        argv[0]);
    return 2;
  }
  hb::rdv::ClientConfig cfg;
  cfg.port = std::atoi(argv[1]);
  cfg.rank = std::atoi(argv[2]);
  cfg.world_size = std::atoi(argv[3]);
  cfg.peer_timeout_ms = std::atoll(argv[4]);
  cfg.heartbeat_interval_ms = std::atoll(argv[5]);
  cfg.connect_timeout_ms = 5000;
  std::string mode = argv[6];
  hb::Health health;
  try {
    auto client = hb::rdv::Client::connect(cfg, &health);
    client->set("child/" + std::to_string(cfg.rank) + "/ready",
                std::to_string(getpid()));
    if (mode == "block") {
      client->get("never", 60000);
    } else {
      client->get("go", 10000);
      client->close();
    }
  } catch (const hb::Error &e) {
    std::fprintf(stderr, "child rank %d: %s\n", cfg.rank, e.what());
    return 3;
  }
  return 0;
}
