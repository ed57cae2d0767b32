// Encoded image bytes to a transformed example: JPEGs through the libjpeg
// decoder (reduced size and region where the transform allows), other
// formats (PNG, BMP, CMYK JPEG) through OpenCV. Shared by every image source.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/transforms.h"

namespace poseidon {

// Writes t.output_shape() floats at `dst`. Returns "" on success, else what
// is wrong with the data ("cannot be decoded as an image ..."). Throws Error
// for images the transform cannot take (smaller than the crop), naming `name`.
std::string decode_transformed(const ImageTransform& t, const uint8_t* data, size_t size, float* dst, uint64_t seed,
                               const std::string& name);

// Reads a whole file; returns "" or why it cannot be read.
std::string read_whole_file(const std::string& path, std::vector<uint8_t>& bytes);

}  // namespace poseidon
