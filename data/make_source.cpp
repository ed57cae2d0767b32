// Source factory: maps a data config map to a Source.
#include <filesystem>

#include "data/idx_source.h"
#include "data/synthetic_source.h"

namespace poseidon {

namespace {
std::string resolve(const std::string& path, const std::string& base_dir) {
  std::filesystem::path p(path);
  if (p.is_absolute() || base_dir.empty()) return path;
  return (std::filesystem::path(base_dir) / p).lexically_normal().string();
}
}  // namespace

std::shared_ptr<Source> make_source(const ConfigNode& c, const std::string& base_dir) {
  std::string kind = c.get_choice("source", {"idx", "synthetic"}, "idx");
  if (kind == "idx") {
    c.check_keys({"source", "images", "labels", "batch_size", "shuffle", "scale", "mean", "std", "limit"});
    std::string images = resolve(c.get_string("images"), base_dir);
    std::string labels = resolve(c.get_string("labels"), base_dir);
    double std = c.get_double("std", 1.0);
    if (std <= 0) c.child("std").fail("expected a positive standard deviation");
    try {
      return std::make_shared<IdxSource>(images, labels, c.get_double("scale", 1.0 / 255.0),
                                         c.get_double("mean", 0.0), std, c.get_int("limit", 0));
    } catch (const ConfigError&) {
      throw;
    } catch (const Error& e) {
      c.fail(e.what());
    }
  }
  c.check_keys({"source", "shape", "num_classes", "size", "seed", "batch_size", "shuffle"});
  Shape shape = c.child("shape").as_int_list();
  for (int64_t d : shape)
    if (d <= 0) c.child("shape").fail("expected positive dimensions");
  int64_t classes = c.get_int("num_classes", 10);
  int64_t size = c.get_int("size", 1024);
  if (classes <= 0) c.child("num_classes").fail("expected a positive class count");
  if (size <= 0) c.child("size").fail("expected a positive example count");
  return std::make_shared<SyntheticSource>(shape, classes, size, c.get_int("seed", 1));
}

}  // namespace poseidon
