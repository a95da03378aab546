#include "serving/pins.h"

#include <thread>

namespace hb {
namespace serving {
namespace {

std::atomic<PinSlot *> g_slots{nullptr};

PinSlot *claim() {
  for (PinSlot *s = g_slots.load(std::memory_order_acquire); s; s = s->next) {
    bool free = false;
    if (s->owned.compare_exchange_strong(free, true)) return s;
  }
  PinSlot *s = new PinSlot;  // never freed: writers may be scanning it
  s->owned.store(true, std::memory_order_relaxed);
  PinSlot *head = g_slots.load(std::memory_order_relaxed);
  do {
    s->next = head;
  } while (!g_slots.compare_exchange_weak(head, s));  // seq_cst: see below
  return s;
}

// Gives the slot back when its thread exits.
struct Holder {
  PinSlot *slot = nullptr;
  ~Holder() {
    if (slot) {
      slot->pinned.store(nullptr, std::memory_order_release);
      slot->owned.store(false, std::memory_order_release);
    }
  }
};
thread_local Holder t_holder;

}  // namespace

PinSlot &my_pin_slot() {
  if (!t_holder.slot) t_holder.slot = claim();
  return *t_holder.slot;
}

void wait_unpinned(const void *p) {
  // seq_cst with the slot push: a slot this scan misses was pushed after
  // the writer unpublished p, so its reader's check sees the new value.
  for (PinSlot *s = g_slots.load(std::memory_order_seq_cst); s; s = s->next) {
    // A reader holds a pin for one lookup: yield, then sleep, until done.
    for (int spins = 0; s->pinned.load(std::memory_order_seq_cst) == p;
         ++spins) {
      if (spins < 64)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

}  // namespace serving
}  // namespace hb
