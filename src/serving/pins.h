// Reader pins for the serving tables (hazard pointers): a reader publishes
// the replica it reads in its own thread's slot, so a writer knows when
// no reader can still see a replica it unpublished. A lookup writes only
// its own slot's cache line (no shared counter, no lock); a writer scans
// every slot once per swap.
//
// One slot per thread serves every table: a thread is inside at most one
// lookup at a time. Slots are never freed (a thread that exits hands its
// slot to the next new thread).
#pragma once

#include <atomic>

namespace hb {
namespace serving {

struct alignas(64) PinSlot {
  std::atomic<const void *> pinned{nullptr};
  std::atomic<bool> owned{false};
  PinSlot *next = nullptr;
};

// The calling thread's slot (claimed on its first call).
PinSlot &my_pin_slot();

// Pins the object `live` points to: after the constructor, get() is a
// value of `live` that no writer will free or change until the destructor.
template <class T>
class Pin {
 public:
  explicit Pin(const std::atomic<T *> &live) : slot_(my_pin_slot()) {
    T *p = live.load(std::memory_order_acquire);
    for (;;) {  // publish, then check it is still live (else retry)
      slot_.pinned.store(p, std::memory_order_seq_cst);
      T *again = live.load(std::memory_order_seq_cst);
      if (again == p) break;
      p = again;
    }
    p_ = p;
  }
  ~Pin() { slot_.pinned.store(nullptr, std::memory_order_release); }
  Pin(const Pin &) = delete;
  Pin &operator=(const Pin &) = delete;
  T *get() const { return p_; }

 private:
  PinSlot &slot_;
  T *p_;
};

// Writers: returns once no slot pins p (p must no longer be published).
void wait_unpinned(const void *p);

}  // namespace serving
}  // namespace hb
