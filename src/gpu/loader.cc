#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "abi/error.h"
#include "gpu/gpu.h"

namespace hb {
namespace gpu {
namespace {

struct Loaded {
  const hb_cuda_plugin *table = nullptr;
  std::string why;
};

#ifdef HB_HAVE_CUDA_PLUGIN  // its only caller; else -Wunused-function warns
// Where to look: HB_CUDA_PLUGIN (a path) first, then next to libhb.so, then
// the loader's search path.
std::string plugin_path_near_core() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&describe), &info) && info.dli_fname) {
    std::string p = info.dli_fname;
    auto slash = p.rfind('/');
    if (slash != std::string::npos)
      return p.substr(0, slash + 1) + "libhb_cuda.so";
  }
  return "libhb_cuda.so";
}
#endif

Loaded load() {
  Loaded out;
#ifndef HB_HAVE_CUDA_PLUGIN
  out.why = "hb was built without CUDA (-DHB_WITH_CUDA=OFF or no toolkit)";
  return out;
#else
  const char *env = std::getenv("HB_CUDA_PLUGIN");
  std::string first = env && *env ? env : plugin_path_near_core();
  void *h = dlopen(first.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h && !(env && *env)) h = dlopen("libhb_cuda.so", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    out.why =
        std::string("cannot load CUDA plugin: ") + (e ? e : first.c_str());
    return out;
  }
  auto entry =
      reinterpret_cast<hb_cuda_plugin_entry_fn>(dlsym(h, HB_CUDA_PLUGIN_ENTRY));
  if (!entry) {
    out.why = "CUDA plugin has no " HB_CUDA_PLUGIN_ENTRY;
    return out;
  }
  const hb_cuda_plugin *t = entry();
  if (!t || t->abi_version != HB_CUDA_PLUGIN_ABI_VERSION) {
    out.why = "CUDA plugin ABI version mismatch";
    return out;
  }
  int32_t n = 0;
  char err[256] = {0};
  if (t->device_count(&n, err, sizeof err) != 0) {
    out.why = std::string("no usable CUDA driver: ") + err;
    return out;
  }
  out.table = t;  // the handle stays open for the life of the process
  return out;
#endif
}

const Loaded &loaded() {
  static std::once_flag once;
  static Loaded l;
  std::call_once(once, [] { l = load(); });
  return l;
}

}  // namespace

const hb_cuda_plugin *plugin(std::string *why) {
  const Loaded &l = loaded();
  if (!l.table && why) *why = l.why;
  return l.table;
}

const hb_cuda_plugin &require_plugin() {
  std::string why;
  const hb_cuda_plugin *p = plugin(&why);
  if (!p) fail(HB_ERR_UNSUPPORTED, "CUDA is not available: %s", why.c_str());
  return *p;
}

bool is_device_pointer(const void *p) {
  const hb_cuda_plugin *t = plugin(nullptr);
  if (!t || !p) return false;
  int32_t dev = 0;
  char err[128];
  return t->pointer_is_device(p, &dev, err, sizeof err) == 0 && dev != 0;
}

int device_count() {
  const hb_cuda_plugin *t = plugin(nullptr);
  if (!t) return 0;
  int32_t n = 0;
  char err[128];
  return t->device_count(&n, err, sizeof err) == 0 ? n : 0;
}

std::string describe() {
#ifdef HB_HAVE_CUDA_PLUGIN
  std::string why;
  const hb_cuda_plugin *t = plugin(&why);
  if (!t) return "cuda_plugin=built; cuda_plugin_loaded=no(" + why + ")";
  return format(
      "cuda_plugin=built; cuda_plugin_loaded=yes; cuda_runtime=%d; nccl=%d; "
      "gpus=%d",
      t->cuda_runtime_version, t->nccl_version, device_count());
#else
  return "cuda_plugin=not built";
#endif
}

}  // namespace gpu
}  // namespace hb
