// safetensors reading (validated, converting to float32) and atomic writing.
#include "core/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace poseidon {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this build reads it in place");

namespace {

using nlohmann::json;

// The reference implementation refuses headers above 100 MB; so do we, so a
// corrupt length cannot make us allocate the whole file for JSON.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// A file being written is "<path>.tmp.<pid>" until it is renamed to <path>.
const std::string kTemporaryInfix = ".tmp.";

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error("safetensors file '" + path + "': " + what);
}

std::string errno_text() { return std::strerror(errno); }

// A JSON value for an error message, cut short: the input may be garbage of any size.
std::string brief(const json& v) {
  std::string s = v.dump();
  return s.size() <= 80 ? s : s.substr(0, 77) + "...";
}

// Closes a descriptor when it goes out of scope.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  // Closes now, reporting the error that close() may be the first to see.
  bool close() {
    int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

// Reads exactly `n` bytes at `offset`; false on a short read or error.
bool read_at(int fd, void* out, size_t n, uint64_t offset) {
  char* p = static_cast<char*>(out);
  while (n > 0) {
    ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t put = ::write(fd, p, n);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

struct DtypeInfo {
  const char* name;
  size_t bytes;
};
constexpr DtypeInfo kDtypes[] = {{"F32", 4}, {"F64", 8}, {"F16", 2},
                                 {"BF16", 2}, {"I64", 8}, {"I32", 4}};

const DtypeInfo* find_dtype(const std::string& name) {
  for (const DtypeInfo& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  uint32_t bits = exponent == 0x1f ? sign | 0x7f800000u | (mantissa << 13)  // inf, NaN
                                   : sign | ((exponent + 112) << 23) | (mantissa << 13);
  return std::bit_cast<float>(bits);
}

template <class T>
void convert(const char* raw, size_t count, float* out) {
  for (size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, raw + i * sizeof(T), sizeof(T));
    out[i] = static_cast<float>(v);
  }
}

// `count` elements of `dtype` (not F32) at `raw`, as float32.
void decode(const std::string& dtype, const char* raw, size_t count, float* out) {
  if (dtype == "F64") return convert<double>(raw, count, out);
  if (dtype == "I64") return convert<int64_t>(raw, count, out);
  if (dtype == "I32") return convert<int32_t>(raw, count, out);
  for (size_t i = 0; i < count; ++i) {
    uint16_t v;
    std::memcpy(&v, raw + i * 2, 2);
    out[i] = dtype == "F16" ? half_to_float(v) : std::bit_cast<float>(static_cast<uint32_t>(v) << 16);
  }
}

// Reads `count` elements of `dtype` at byte `offset` of `fd` as float32 into
// `out`; false on a short read.
bool read_elements(int fd, const std::string& dtype, uint64_t offset, size_t count, float* out) {
  if (dtype == "F32") return read_at(fd, out, count * sizeof(float), offset);
  std::vector<char> raw(count * find_dtype(dtype)->bytes);
  if (!read_at(fd, raw.data(), raw.size(), offset)) return false;
  decode(dtype, raw.data(), count, out);
  return true;
}

// One tensor entry of the header, checked against the data section's size.
struct Entry {
  std::string name;
  std::string dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

uint64_t as_unsigned(const json& v, const std::string& path, const std::string& what) {
  if (!v.is_number_unsigned()) fail(path, what + " must be a non-negative integer, found " + brief(v));
  return v.get<uint64_t>();
}

Entry parse_entry(const std::string& path, const std::string& name, const json& info,
                  uint64_t data_bytes) {
  const std::string where = "tensor '" + name + "'";
  if (!info.is_object()) fail(path, where + ": expected an object, found " + brief(info));
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!info.contains(key)) fail(path, where + ": missing \"" + key + "\"");
  Entry e;
  e.name = name;
  const json& dtype = info["dtype"];
  if (!dtype.is_string()) fail(path, where + ": \"dtype\" must be a string, found " + brief(dtype));
  e.dtype = dtype.get<std::string>();
  const DtypeInfo* type = find_dtype(e.dtype);
  if (!type) fail(path, where + ": unsupported dtype '" + e.dtype + "' (supported: F32, F64, F16, BF16, I64, I32)");

  const json& shape = info["shape"];
  if (!shape.is_array()) fail(path, where + ": \"shape\" must be an array, found " + brief(shape));
  uint64_t bytes = type->bytes;
  for (const json& d : shape) {
    uint64_t dim = as_unsigned(d, path, where + ": a shape dimension");
    if (dim > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(bytes, dim, &bytes))
      fail(path, where + ": shape " + brief(shape) + " is too large");
    e.shape.push_back(static_cast<int64_t>(dim));
  }

  const json& offsets = info["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    fail(path, where + ": \"data_offsets\" must be [begin, end], found " + brief(offsets));
  e.begin = as_unsigned(offsets[0], path, where + ": data_offsets begin");
  e.end = as_unsigned(offsets[1], path, where + ": data_offsets end");
  if (e.begin > e.end)
    fail(path, where + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                   "] end before they begin");
  if (e.end > data_bytes)
    fail(path, where + ": data truncated: the tensor ends at byte " + std::to_string(e.end) +
                   " of the data section, which has only " + std::to_string(data_bytes) + " bytes");
  if (e.end - e.begin != bytes)
    fail(path, where + ": data_offsets span " + std::to_string(e.end - e.begin) + " bytes, but " +
                   e.dtype + " " + shape_str(e.shape) + " needs " + std::to_string(bytes));
  return e;
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const json& meta) {
  if (!meta.is_object()) fail(path, "\"__metadata__\" must be an object, found " + brief(meta));
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : meta.items()) {
    if (!value.is_string())
      fail(path, "\"__metadata__\" value of '" + key + "' must be a string, found " + brief(value));
    out[key] = value.get<std::string>();
  }
  return out;
}

void check_no_overlap(const std::string& path, std::vector<Entry> entries) {
  std::erase_if(entries, [](const Entry& e) { return e.begin == e.end; });
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < entries.size(); ++i)
    if (entries[i].begin < entries[i - 1].end)
      fail(path, "tensors '" + entries[i - 1].name + "' and '" + entries[i].name +
                     "' overlap in the data section");
}

std::string build_header(const std::vector<std::pair<std::string, Shape>>& entries,
                         const std::map<std::string, std::string>& metadata,
                         const std::string& path) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, shape] : entries) {
    POSEIDON_REQUIRE(name != "__metadata__" && !header.contains(name))
        << "safetensors file '" << path << "': tensor name '" << name
        << "' is reserved or used twice";
    uint64_t bytes = static_cast<uint64_t>(shape_numel(shape)) * sizeof(float);
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception&) {
    fail(path, "tensor names and metadata must be valid UTF-8 text");
  }
  // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  return text;
}

std::string parent_directory(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

// Gives DeferredTensor its fields, which only this file sets.
struct DeferredTensorMaker {
  static DeferredTensor make(std::shared_ptr<const int> fd, const std::string& path, const Entry& e,
                             uint64_t data_start) {
    DeferredTensor t;
    t.fd_ = std::move(fd);
    t.path_ = path;
    t.name_ = e.name;
    t.dtype_ = e.dtype;
    t.offset_ = data_start + e.begin;
    t.shape_ = e.shape;
    return t;
  }
};

void DeferredTensor::read(int64_t first, int64_t count, float* out) const {
  POSEIDON_CHECK(first >= 0 && count >= 0 && first + count <= shape_numel(shape_))
      << "elements [" << first << ", " << first + count << ") of tensor '" << name_ << "' " << shape_str(shape_);
  const uint64_t at = offset_ + static_cast<uint64_t>(first) * find_dtype(dtype_)->bytes;
  if (!read_elements(*fd_, dtype_, at, static_cast<size_t>(count), out))
    fail(path_, "cannot read tensor '" + name_ + "': data truncated");
}

SafetensorsFile read_safetensors(const std::string& path, const std::function<bool(const std::string&)>& defer) {
  const int opened = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (opened < 0) fail(path, "cannot open: " + errno_text());
  // Shared with the deferred entries, which read from it later.
  const std::shared_ptr<const int> fd(new int(opened), [](const int* p) {
    ::close(*p);
    delete p;
  });
  struct stat st {};
  if (::fstat(*fd, &st) != 0) fail(path, "cannot stat: " + errno_text());
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
  if (file_bytes < 8)
    fail(path, "file is " + std::to_string(file_bytes) + " bytes, shorter than the 8-byte header length");

  uint64_t header_bytes = 0;
  if (!read_at(*fd, &header_bytes, 8, 0)) fail(path, "cannot read the header length: " + errno_text());
  if (header_bytes > file_bytes - 8)
    fail(path, "header length " + std::to_string(header_bytes) + " exceeds the " +
                   std::to_string(file_bytes - 8) + " bytes that follow it");
  if (header_bytes > kMaxHeaderBytes)
    fail(path, "header length " + std::to_string(header_bytes) + " exceeds the limit of " +
                   std::to_string(kMaxHeaderBytes) + " bytes");
  std::string text(header_bytes, '\0');
  if (!read_at(*fd, text.data(), text.size(), 8)) fail(path, "cannot read the header: " + errno_text());

  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    fail(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail(path, "header must be a JSON object, found " + brief(header));

  const uint64_t data_start = 8 + header_bytes;
  const uint64_t data_bytes = file_bytes - data_start;
  SafetensorsFile file;
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") file.metadata = parse_metadata(path, info);
    else entries.push_back(parse_entry(path, name, info, data_bytes));
  }
  check_no_overlap(path, entries);

  for (const Entry& e : entries) {
    if (defer && defer(e.name)) {
      file.deferred.emplace(e.name, DeferredTensorMaker::make(fd, path, e, data_start));
      continue;
    }
    SafetensorsTensor& t = file.tensors[e.name];
    t.shape = e.shape;
    t.data.resize(static_cast<size_t>(shape_numel(e.shape)));
    // The size was checked up front; a short read here means the file shrank.
    if (!read_elements(*fd, e.dtype, data_start + e.begin, t.data.size(), t.data.data()))
      fail(path, "cannot read tensor '" + e.name + "': data truncated");
  }
  return file;
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                       const std::map<std::string, std::string>& metadata,
                       const std::vector<StreamedTensor>& streamed) {
  std::vector<std::pair<std::string, Shape>> layout;
  for (const auto& [name, tensor] : tensors) {
    POSEIDON_CHECK(tensor != nullptr) << "null tensor '" << name << "' for " << path;
    layout.emplace_back(name, tensor->shape());
  }
  for (const StreamedTensor& s : streamed) layout.emplace_back(s.name, s.shape);
  const std::string header = build_header(layout, metadata, path);
  const std::string tmp = path + kTemporaryInfix + std::to_string(::getpid());

  // The first failure, as the message to throw; the producers run on regardless.
  std::string failure;
  auto note = [&](const std::string& step) {
    if (failure.empty())
      failure = "cannot write (" + step + " '" + tmp + "'): " + errno_text() + "; the file at this path is unchanged";
  };
  FileDescriptor fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  const bool created = fd.get() >= 0;
  if (!created) failure = "cannot create '" + tmp + "': " + errno_text();
  auto put = [&](const void* data, size_t bytes) {
    if (failure.empty() && !write_all(fd.get(), data, bytes)) note("writing");
  };
  const uint64_t header_bytes = header.size();
  put(&header_bytes, 8);
  put(header.data(), header.size());
  for (const auto& [name, tensor] : tensors) put(tensor->data(), static_cast<size_t>(tensor->numel()) * sizeof(float));
  try {
    for (const StreamedTensor& s : streamed) {
      uint64_t given = 0;
      s.produce([&](const float* data, size_t count) {
        given += count;
        put(data, count * sizeof(float));
      });
      if (given != static_cast<uint64_t>(shape_numel(s.shape)) && failure.empty())
        failure = "tensor '" + s.name + "' " + shape_str(s.shape) + " was given " + std::to_string(given) +
                  " numbers; the file at this path is unchanged";
    }
  } catch (...) {
    if (created) ::unlink(tmp.c_str());
    throw;
  }
  if (failure.empty() && ::fsync(fd.get()) != 0) note("syncing");
  if (failure.empty() && !fd.close()) note("closing");
  if (failure.empty() && ::rename(tmp.c_str(), path.c_str()) != 0) note("renaming");
  if (!failure.empty()) {
    if (created) ::unlink(tmp.c_str());
    fail(path, failure);
  }

  // The rename itself is durable only once the directory entry is synced.
  FileDescriptor dir(::open(parent_directory(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) ::fsync(dir.get());
}

bool is_safetensors_temporary(const std::string& file_name) {
  const size_t at = file_name.rfind(kTemporaryInfix);
  if (at == std::string::npos || at == 0) return false;
  const std::string pid = file_name.substr(at + kTemporaryInfix.size());
  return !pid.empty() && std::all_of(pid.begin(), pid.end(), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace poseidon
