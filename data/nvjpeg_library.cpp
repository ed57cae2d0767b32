// Run-time loading of nvJPEG and the choice of a run's JPEG decoder.
#include "data/nvjpeg_library.h"

#include <dlfcn.h>

namespace poseidon {

namespace {
// libraryPropertyType of library_types.h.
constexpr int kMajorVersion = 0, kMinorVersion = 1, kPatchLevel = 2;

template <typename F>
bool resolve(void* handle, const char* symbol, F& function, std::string& missing) {
  function = reinterpret_cast<F>(dlsym(handle, symbol));
  if (!function) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
  return function != nullptr;
}
}  // namespace

const std::vector<std::string>& nvjpeg_library_names() {
  static const std::vector<std::string> names = {"libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so"};
  return names;
}

std::string NvjpegLibrary::version() const {
  if (!loaded()) return "";
  int major = 0, minor = 0, patch = 0;
  if (get_property(kMajorVersion, &major) != 0 || get_property(kMinorVersion, &minor) != 0 ||
      get_property(kPatchLevel, &patch) != 0)
    return "of unknown version";
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

NvjpegLibrary load_nvjpeg(const std::vector<std::string>& names) {
  NvjpegLibrary lib;
  std::string tried;
  for (const std::string& name : names) {
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      tried += (tried.empty() ? "" : "; ") + (why ? std::string(why) : name + ": cannot be loaded");
      continue;
    }
    std::string missing;
    resolve(handle, "nvjpegGetProperty", lib.get_property, missing);
    resolve(handle, "nvjpegCreateSimple", lib.create_simple, missing);
    resolve(handle, "nvjpegDestroy", lib.destroy, missing);
    resolve(handle, "nvjpegJpegStateCreate", lib.state_create, missing);
    resolve(handle, "nvjpegJpegStateDestroy", lib.state_destroy, missing);
    resolve(handle, "nvjpegGetImageInfo", lib.get_image_info, missing);
    resolve(handle, "nvjpegDecode", lib.decode, missing);
    if (!missing.empty()) {
      tried += (tried.empty() ? "" : "; ") + name + " lacks " + missing;
      dlclose(handle);
      lib = NvjpegLibrary{};
      continue;
    }
    lib.handle = handle;
    lib.path = name;
    return lib;
  }
  lib.problem = tried.empty() ? "no library name to try" : tried;
  return lib;
}

ImageDecoderChoice choose_image_decoder(bool cuda_run, int cuda_devices, const NvjpegLibrary& library) {
  const std::string cpu = "image decoding: CPU (libjpeg-turbo)";
  if (!cuda_run) return {false, cpu};
  if (cuda_devices == 0) return {false, cpu + ": no CUDA device for nvJPEG"};
  if (!library.loaded())
    return {false, cpu + ": nvJPEG not found (" + library.problem +
                       "); the CUDA toolkit's libnvjpeg or PyPI's nvidia-nvjpeg (its lib folder on LD_LIBRARY_PATH) "
                       "provides it"};
  return {true, "image decoding: nvJPEG " + library.version() + " (" + library.path + ") on the GPU"};
}

}  // namespace poseidon
