// NVIDIA's nvJPEG, loaded at run time (dlopen) so that the build needs
// nothing of it: the CUDA toolkit ships libnvjpeg on some machines, PyPI's
// nvidia-nvjpeg wheel (site-packages/nvidia/cu13/lib) on others, and many
// have neither. Only the few C entry points of a single-image decode are
// resolved; their declarations follow nvjpeg.h, whose C ABI is stable across
// releases. Which JPEG decoder a `device: cuda` run uses is chosen here, with
// the line saying why that is printed at its start.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace poseidon {

// nvjpeg.h's types, by layout.
struct NvjpegImage {
  unsigned char* channel[4];
  size_t pitch[4];
};
using NvjpegHandle = struct NvjpegHandleOpaque*;
using NvjpegState = struct NvjpegStateOpaque*;
constexpr int kNvjpegOutputRgbi = 5;  // NVJPEG_OUTPUT_RGBI: interleaved 8-bit RGB

struct NvjpegLibrary {
  void* handle = nullptr;  // dlopen's, or null when not loaded
  std::string path;        // the name it was loaded by
  std::string problem;     // why it is not loaded ("" when it is)
  int (*get_property)(int type, int* value) = nullptr;
  int (*create_simple)(NvjpegHandle* handle) = nullptr;
  int (*destroy)(NvjpegHandle handle) = nullptr;
  int (*state_create)(NvjpegHandle handle, NvjpegState* state) = nullptr;
  int (*state_destroy)(NvjpegState state) = nullptr;
  int (*get_image_info)(NvjpegHandle handle, const unsigned char* data, size_t length, int* components,
                        int* subsampling, int* widths, int* heights) = nullptr;
  int (*decode)(NvjpegHandle handle, NvjpegState state, const unsigned char* data, size_t length, int output_format,
                NvjpegImage* destination, void* stream) = nullptr;
  bool loaded() const { return handle != nullptr; }
  std::string version() const;  // "13.3.2" or "" when not loaded
};

// The names tried, in order: the CUDA 13 and 12 libraries, then any.
const std::vector<std::string>& nvjpeg_library_names();
// The first of `names` that loads and has every entry point; else an
// unloaded library whose `problem` names what was tried and why it failed.
// Stays loaded for the process's life.
NvjpegLibrary load_nvjpeg(const std::vector<std::string>& names = nvjpeg_library_names());

// The JPEG decoder of a run: nvJPEG on the GPU for a CUDA run on a machine
// with a GPU and the library, the CPU's libjpeg-turbo otherwise.
struct ImageDecoderChoice {
  bool gpu = false;
  std::string line;  // "image decoding: ...", printed at the start of the run
};
ImageDecoderChoice choose_image_decoder(bool cuda_run, int cuda_devices, const NvjpegLibrary& library);

}  // namespace poseidon
