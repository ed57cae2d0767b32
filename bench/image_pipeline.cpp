// Throughput of the image pipeline alone (decode, resize, crop, mirror,
// normalise, batch) through the same Loader training uses, with no model
// behind it, so bench/image_pipeline.sh can set it against torchvision.
//
//   image_pipeline_bench <image folder> [workers] [epochs] [batch] [resize] [crop] [augmentation]
//
// augmentation: `fixed` (resize the shorter side, random crop; the default)
// or `rrc` (random_resized_crop to crop x crop; resize unused).
//
// Prints one JSON object: images per second of each timed epoch after one
// warm-up epoch (which also fills the page cache).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "data/loader.h"

namespace {
int arg(int argc, char** argv, int i, int def) { return argc > i ? std::atoi(argv[i]) : def; }
}  // namespace

int main(int argc, char** argv) {
  using namespace poseidon;
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s <image folder> [workers=2] [epochs=3] [batch=32] [resize=256] [crop=224] [fixed|rrc]\n",
                 argv[0]);
    return 2;
  }
  const int workers = arg(argc, argv, 2, 2), epochs = arg(argc, argv, 3, 3), batch = arg(argc, argv, 4, 32);
  const int resize = arg(argc, argv, 5, 256), crop = arg(argc, argv, 6, 224);
  const std::string augmentation = argc > 7 ? argv[7] : "fixed";
  try {
    const std::string transform =
        augmentation == "rrc" ? "random_resized_crop: " + std::to_string(crop)
                              : "resize: " + std::to_string(resize) + ", crop: " + std::to_string(crop) +
                                    ", crop_mode: random";
    const std::string yaml = "{source: image_folder, root: '" + std::string(argv[1]) + "', " + transform +
                             ", mirror: true, mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}";
    auto source = make_source(ConfigNode::parse(yaml, "image_pipeline_bench"), "");
    LoaderConfig config;
    config.batch_size = batch;
    config.workers = workers;
    Loader loader(source, config);
    Tensor data, labels;
    std::vector<double> rates;
    for (int epoch = 0; epoch <= epochs; ++epoch) {
      const auto start = std::chrono::steady_clock::now();
      int64_t images = 0;
      for (int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
        loader.next(data, labels);
        images += data.dim(0);
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (epoch > 0) rates.push_back(images / seconds);
    }
    std::printf(
        "{\"images\": %lld, \"workers\": %d, \"batch\": %d, \"resize\": %d, \"crop\": %d, \"augmentation\": \"%s\", "
        "\"images_per_sec\": [",
        static_cast<long long>(source->size()), workers, batch, resize, crop, augmentation.c_str());
    for (size_t i = 0; i < rates.size(); ++i) std::printf("%s%.1f", i ? ", " : "", rates[i]);
    std::printf("]}\n");
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
