// IDX reader with transparent gzip support (zlib).
#include "data/idx_source.h"

#include <zlib.h>

#include <algorithm>

#include "core/error.h"
#include "core/paths.h"

namespace poseidon {

namespace {
std::vector<uint8_t> read_maybe_gzip(const std::string& path) {
  if (const std::string why = why_not_a_file(path); !why.empty())
    throw Error(path + ": data file " + why);
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files unchanged
  if (!f) throw Error(path + ": cannot open data file");
  std::vector<uint8_t> out;
  std::vector<uint8_t> chunk(1 << 20);
  for (;;) {
    int n = gzread(f, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int code = 0;
      std::string msg = gzerror(f, &code);
      gzclose(f);
      throw Error(path + ": corrupt compressed data (" + msg + ")");
    }
    if (n == 0) break;
    out.insert(out.end(), chunk.begin(), chunk.begin() + n);
  }
  gzclose(f);
  return out;
}
}  // namespace

std::vector<int64_t> read_idx(const std::string& path, std::vector<uint8_t>& bytes) {
  std::vector<uint8_t> raw = read_maybe_gzip(path);
  if (raw.size() < 4) throw Error(path + ": not an IDX file (shorter than its 4-byte header)");
  if (raw[0] != 0 || raw[1] != 0)
    throw Error(path + ": not an IDX file (magic must start with two zero bytes)");
  if (raw[2] != 0x08)
    throw Error(path + ": unsupported IDX element type 0x" + std::to_string(raw[2]) +
                " (only unsigned bytes, 0x08, are supported)");
  int ndim = raw[3];
  if (ndim < 1 || ndim > 4) throw Error(path + ": IDX header declares " + std::to_string(ndim) + " dimensions (expected 1 to 4)");
  size_t header = 4 + 4 * static_cast<size_t>(ndim);
  if (raw.size() < header) throw Error(path + ": IDX header truncated");
  std::vector<int64_t> dims;
  int64_t total = 1;
  for (int d = 0; d < ndim; ++d) {
    const uint8_t* p = raw.data() + 4 + 4 * d;
    int64_t v = (int64_t(p[0]) << 24) | (int64_t(p[1]) << 16) | (int64_t(p[2]) << 8) | p[3];
    if (v <= 0 || v > (int64_t(1) << 31)) throw Error(path + ": IDX dimension " + std::to_string(d) + " is " + std::to_string(v));
    dims.push_back(v);
    if (total > (int64_t(1) << 40) / v) throw Error(path + ": IDX header declares an absurd size");
    total *= v;
  }
  if (static_cast<int64_t>(raw.size() - header) != total)
    throw Error(path + ": IDX payload has " + std::to_string(raw.size() - header) +
                " bytes but the header declares " + std::to_string(total));
  bytes.assign(raw.begin() + header, raw.end());
  return dims;
}

IdxSource::IdxSource(const std::string& images, const std::string& labels, float scale,
                     float mean, float std, int64_t limit)
    : labels_path_(labels), scale_(scale), mean_(mean), std_(std) {
  std::vector<int64_t> idims = read_idx(images, pixels_);
  std::vector<int64_t> ldims = read_idx(labels, labels_);
  if (idims.size() < 2) throw Error(images + ": an images file needs at least 2 dimensions");
  if (ldims.size() != 1) throw Error(labels + ": a labels file has 1 dimension, found " + std::to_string(ldims.size()));
  if (idims[0] != ldims[0])
    throw Error(images + " holds " + std::to_string(idims[0]) + " images but " + labels + " holds " +
                std::to_string(ldims[0]) + " labels");
  shape_.assign(idims.begin() + 1, idims.end());
  if (shape_.size() == 2) shape_.insert(shape_.begin(), 1);  // [rows, cols] -> [1, rows, cols]
  count_ = limit > 0 ? std::min(limit, idims[0]) : idims[0];
  classes_ = 1 + *std::max_element(labels_.begin(), labels_.begin() + count_);
}

int64_t IdxSource::read(int64_t index, float* dst, uint64_t) const {
  const int64_t n = shape_numel(shape_);
  const uint8_t* src = pixels_.data() + index * n;
  const float inv_std = 1.f / std_;
  for (int64_t i = 0; i < n; ++i) dst[i] = (src[i] * scale_ - mean_) * inv_std;
  return labels_[index];
}

std::string IdxSource::find_label_outside(int64_t classes, int64_t ignored) const {
  for (int64_t i = 0; i < count_; ++i)
    if (labels_[i] >= classes && labels_[i] != ignored)
      return labels_path_ + ": label " + std::to_string(labels_[i]) + " of example " + std::to_string(i);
  return "";
}

}  // namespace poseidon
