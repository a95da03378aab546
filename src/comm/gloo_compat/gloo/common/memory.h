// Stand-in for gloo/common/memory.h, which Debian's libgloo-dev leaves out
// although gloo/transport/tcp/{pair,context}.h include it. Only
// comm/tcp_pair.cc sees it (src/CMakeLists.txt), to subclass tcp::Pair: it
// needs the class layout, never these templates' code, which stays the
// library's. Layout is Gloo's: each box holds one std smart pointer.
#pragma once

#include <memory>

namespace gloo {

template <typename T>
class ShareableNonOwningPtr;
template <typename T>
class WeakNonOwningPtr;

// A short-lived strong reference taken from a WeakNonOwningPtr.
template <typename T>
class NonOwningPtr final {
 public:
  NonOwningPtr() = default;
  explicit NonOwningPtr(const WeakNonOwningPtr<T> &weak)
      : ptr_(weak.ptr_.lock()) {}
  T *operator->() const noexcept { return ptr_.get(); }
  explicit operator bool() const noexcept { return bool(ptr_); }

 private:
  std::shared_ptr<T> ptr_;
};

// A weak reference to an object owned elsewhere.
template <typename T>
class WeakNonOwningPtr final {
 public:
  WeakNonOwningPtr() = default;
  explicit WeakNonOwningPtr(const ShareableNonOwningPtr<T> &root)
      : ptr_(root.ptr_) {}

 private:
  std::weak_ptr<T> ptr_;
  friend class NonOwningPtr<T>;
};

// The root reference (only declared here: hb never creates one).
template <typename T>
class ShareableNonOwningPtr final {
 private:
  std::shared_ptr<T> ptr_;
  friend class WeakNonOwningPtr<T>;
};

static_assert(sizeof(NonOwningPtr<int>) == sizeof(std::shared_ptr<int>) &&
                  sizeof(WeakNonOwningPtr<int>) == sizeof(std::weak_ptr<int>),
              "must keep Gloo's layout");

}  // namespace gloo
