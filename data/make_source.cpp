// Source factory: maps a data config map to a Source, checking every key.
#include <cmath>
#include <filesystem>

#include "data/idx_source.h"
#include "data/synthetic_source.h"
#ifdef POSEIDON_HAVE_IMAGES
#include "data/image_source.h"
#include "data/shard_source.h"
#endif

namespace poseidon {

namespace {
std::string resolve(const std::string& path, const std::string& base_dir) {
  std::filesystem::path p(path);
  if (p.is_absolute() || base_dir.empty()) return path;
  return (std::filesystem::path(base_dir) / p).lexically_normal().string();
}

// Keys the loader reads from the same map (see read_loader_keys).
const std::vector<std::string> kLoaderKeys = {"source", "batch_size", "shuffle", "workers", "prefetch"};

std::vector<std::string> with_loader_keys(std::vector<std::string> keys) {
  keys.insert(keys.end(), kLoaderKeys.begin(), kLoaderKeys.end());
  return keys;
}

#ifdef POSEIDON_HAVE_IMAGES
// One value or [h, w], each positive.
std::array<int64_t, 2> height_width(const ConfigNode& node) {
  std::vector<int64_t> v = node.as_int_list();
  if (v.size() != 1 && v.size() != 2) node.fail("expected one size or [height, width]");
  for (int64_t d : v)
    if (d <= 0) node.fail("expected positive sizes");
  return {v.front(), v.back()};
}

// One value for every channel or one per RGB channel.
std::array<float, 3> per_channel(const ConfigNode& c, const std::string& key, float def, bool positive) {
  auto node = c.find(key);
  if (!node) return {def, def, def};
  std::vector<float> v;
  if (node->is_sequence())
    for (size_t i = 0; i < node->size(); ++i) v.push_back(static_cast<float>(node->at(i).as_double()));
  else
    v.push_back(static_cast<float>(node->as_double()));
  if (v.size() != 1 && v.size() != 3) node->fail("expected one value or three (R, G, B)");
  for (float x : v)
    if (positive && !(x > 0)) node->fail("expected positive values");
  if (v.size() == 1) return {v[0], v[0], v[0]};
  return {v[0], v[1], v[2]};
}

// A [low, high] pair with low <= high, each checked by `valid`.
std::array<double, 2> range(const ConfigNode& c, const std::string& key, std::array<double, 2> def, bool (*valid)(double),
                            const std::string& expected) {
  auto node = c.find(key);
  if (!node) return def;
  if (!node->is_sequence() || node->size() != 2) node->fail("expected [low, high]");
  const double low = node->at(0).as_double(), high = node->at(1).as_double();
  if (!valid(low) || !valid(high) || low > high) node->fail("expected [low, high] with low <= high, " + expected);
  return {low, high};
}

void random_resized_crop(const ConfigNode& c, ImageTransformConfig& t) {
  for (const char* key : {"resize", "crop", "crop_mode"})
    if (c.has(key)) c.child(key).fail(std::string("`") + key + "` does not go with `random_resized_crop`, which resizes its own crop");
  auto [h, w] = height_width(c.child("random_resized_crop"));
  t.rrc_h = h;
  t.rrc_w = w;
  t.rrc_scale = range(c, "crop_scale", t.rrc_scale, [](double x) { return x > 0 && x <= 1; }, "each in (0, 1]");
  t.rrc_ratio = range(c, "crop_ratio", t.rrc_ratio, [](double x) { return x > 0 && std::isfinite(x); }, "each positive");
}

ImageTransform image_transform(const ConfigNode& c) {
  ImageTransformConfig t;
  t.jpeg_scaling = c.get_bool("jpeg_scaling", true);
  t.mirror = c.get_bool("mirror", false);
  t.mean = per_channel(c, "mean", 0.f, false);
  t.std = per_channel(c, "std", 1.f, true);
  if (c.has("random_resized_crop")) {
    random_resized_crop(c, t);
    return ImageTransform(t);
  }
  for (const char* key : {"crop_scale", "crop_ratio"})
    if (c.has(key)) c.child(key).fail(std::string("`") + key + "` needs `random_resized_crop`");
  if (auto resize = c.find("resize")) {
    if (resize->is_sequence()) {
      auto [h, w] = height_width(*resize);
      t.resize_h = h;
      t.resize_w = w;
    } else {
      t.resize_shorter = resize->as_int();
      if (t.resize_shorter < 0) resize->fail("expected the shorter side's length, or 0 for no resize");
    }
  }
  if (auto crop = c.find("crop")) {
    auto [h, w] = height_width(*crop);
    t.crop_h = h;
    t.crop_w = w;
    t.random_crop = c.get_choice("crop_mode", {"center", "random"}, "center") == "random";
  } else if (c.has("crop_mode")) {
    c.child("crop_mode").fail("crop_mode needs a `crop` size");
  }
  if (t.crop_h == 0 && t.resize_h == 0)
    c.fail("image sources need `crop`, `resize: [height, width]` or `random_resized_crop`, so that every example has "
           "the same shape");
  return ImageTransform(t);
}

const std::vector<std::string> kTransformKeys = {"resize",     "crop",       "crop_mode",           "mirror",
                                                 "mean",       "std",        "on_error",            "jpeg_scaling",
                                                 "crop_scale", "crop_ratio", "random_resized_crop"};

// `shards`: a WebDataset index (.json) or a list of tar files.
std::shared_ptr<Source> shard_source(const ConfigNode& c, const std::string& base_dir) {
  std::vector<std::string> keys = with_loader_keys(kTransformKeys);
  keys.insert(keys.end(), {"shards", "num_classes", "shuffle_buffer"});
  c.check_keys(keys);
  ImageTransform transform = image_transform(c);
  const bool skip = c.get_choice("on_error", {"error", "skip"}, "error") == "skip";
  const int64_t buffer = c.get_int("shuffle_buffer", 1000);
  if (buffer < 1 || buffer > 10'000'000) c.child("shuffle_buffer").fail("expected 1 (no shuffle) to 10000000 examples");
  const ConfigNode shards_node = c.child("shards");
  std::vector<ShardFile> shards;
  int64_t classes = 0;
  try {
    if (shards_node.is_sequence()) {
      std::vector<std::string> tars;
      for (size_t i = 0; i < shards_node.size(); ++i) tars.push_back(resolve(shards_node.at(i).as_string(), base_dir));
      if (tars.empty()) shards_node.fail("expected at least one tar file");
      shards = count_shard_examples(tars);
    } else {
      const std::string path = resolve(shards_node.as_string(), base_dir);
      if (path.size() > 5 && path.substr(path.size() - 5) == ".json")
        shards = read_shard_index(path, classes);
      else
        shards = count_shard_examples({path});
    }
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    shards_node.fail(e.what());
  }
  if (c.has("num_classes") || classes == 0) {
    classes = c.get_int("num_classes");
    if (classes <= 0) c.child("num_classes").fail("expected a positive class count");
  }
  int64_t total = 0;
  for (const ShardFile& f : shards) total += f.examples;
  if (total == 0) shards_node.fail("the shards hold no example");
  return std::make_shared<ShardSource>(std::move(shards), classes, std::move(transform), buffer, skip,
                                       c.location().str());
}

std::shared_ptr<Source> image_source(const ConfigNode& c, const std::string& kind, const std::string& base_dir) {
  std::vector<std::string> keys = with_loader_keys(kTransformKeys);
  keys.push_back("root");
  if (kind == "image_list") keys.push_back("list");
  c.check_keys(keys);
  ImageTransform transform = image_transform(c);
  const bool skip = c.get_choice("on_error", {"error", "skip"}, "error") == "skip";
  const std::string origin = c.location().str();
  std::vector<ImageEntry> entries;
  std::string list_file;
  int64_t classes = 0;
  if (kind == "image_folder") {
    std::vector<std::string> names;
    try {
      entries = scan_image_folder(resolve(c.get_string("root"), base_dir), names);
    } catch (const Error& e) {
      c.child("root").fail(e.what());
    }
    classes = static_cast<int64_t>(names.size());
  } else {
    const std::string list = resolve(c.get_string("list"), base_dir);
    list_file = list;
    const std::string root =
        c.has("root") ? resolve(c.get_string("root"), base_dir) : std::filesystem::path(list).parent_path().string();
    try {
      entries = read_image_list(list, root, c.child("list").location().str());
    } catch (const ConfigError&) {
      throw;
    } catch (const Error& e) {
      c.child("list").fail(e.what());
    }
    for (const ImageEntry& e : entries) classes = std::max(classes, e.label + 1);
  }
  return std::make_shared<ImageSource>(std::move(entries), classes, std::move(transform), skip, origin, list_file);
}
#else
std::shared_ptr<Source> image_source(const ConfigNode& c, const std::string& kind, const std::string&) {
  c.child("source").fail("source '" + kind + "' needs the image pipeline, which this build leaves out (POSEIDON_IMAGES=OFF)");
}
std::shared_ptr<Source> shard_source(const ConfigNode& c, const std::string&) {
  c.child("source").fail("source 'tar_shards' needs the image pipeline, which this build leaves out (POSEIDON_IMAGES=OFF)");
}
#endif
}  // namespace

std::shared_ptr<Source> make_source(const ConfigNode& c, const std::string& base_dir) {
  std::string kind = c.get_choice("source", {"idx", "synthetic", "image_folder", "image_list", "tar_shards"}, "idx");
  if (kind == "image_folder" || kind == "image_list") return image_source(c, kind, base_dir);
  if (kind == "tar_shards") return shard_source(c, base_dir);
  if (kind == "idx") {
    c.check_keys(with_loader_keys({"images", "labels", "scale", "mean", "std", "limit"}));
    std::string images = resolve(c.get_string("images"), base_dir);
    std::string labels = resolve(c.get_string("labels"), base_dir);
    double std = c.get_double("std", 1.0);
    if (std <= 0) c.child("std").fail("expected a positive standard deviation");
    try {
      return std::make_shared<IdxSource>(images, labels, c.get_double("scale", 1.0 / 255.0), c.get_double("mean", 0.0),
                                         std, c.get_int("limit", 0));
    } catch (const ConfigError&) {
      throw;
    } catch (const Error& e) {
      c.fail(e.what());
    }
  }
  c.check_keys(with_loader_keys({"shape", "num_classes", "size", "seed"}));
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
