// libjpeg decoding with setjmp/longjmp error handling: libjpeg is C, so its
// fatal errors leave through longjmp, never an exception through its frames.
// The function that calls setjmp holds no object with a destructor.
#include "data/jpeg_decoder.h"

// clang-format off
#include <cstdio>  // jpeglib.h needs FILE and size_t declared first
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include <algorithm>
#include <csetjmp>
#include <string>

namespace poseidon {

namespace {
struct ErrorManager {
  jpeg_error_mgr base;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void leave_on_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings are ignored (as OpenCV and PIL ignore them), except data that
// ends before the image does: libjpeg would fill the rest with grey.
void on_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) leave_on_error(cinfo);
}

struct Decompressor {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  Decompressor() {
    cinfo.err = jpeg_std_error(&err.base);
    err.base.error_exit = leave_on_error;
    err.base.emit_message = on_message;
    err.message[0] = '\0';
    jpeg_create_decompress(&cinfo);
  }
  ~Decompressor() { jpeg_destroy_decompress(&cinfo); }
};

int64_t floor_div(int64_t a, int64_t b) { return a / b; }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Returns false after a libjpeg error (its text in d.err.message), or with
// `cmyk` set for colour spaces libjpeg-turbo cannot turn into BGR, or
// `too_large`.
bool run(Decompressor& d, const uint8_t* data, size_t size, const std::function<JpegRequest(int64_t, int64_t)>& choose,
         DecodedRegion& out, bool& cmyk, bool& too_large) {
  jpeg_decompress_struct* cinfo = &d.cinfo;
  if (setjmp(d.err.jump)) return false;
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  if (cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK) {
    cmyk = true;
    return false;
  }
  // OpenCV's limit for any image it decodes, so a forged header cannot ask for gigabytes.
  if (static_cast<uint64_t>(cinfo->image_height) * cinfo->image_width > (uint64_t{1} << 30)) {
    too_large = true;
    return false;
  }
  const JpegRequest request = choose(cinfo->image_height, cinfo->image_width);
  cinfo->out_color_space = JCS_EXT_BGR;
  cinfo->scale_num = 1;
  cinfo->scale_denom = static_cast<unsigned>(request.scale_denom);
  jpeg_start_decompress(cinfo);
  const int64_t denom = request.scale_denom, rows = cinfo->output_height, cols = cinfo->output_width;
  // One scaled pixel of margin: bilinear interpolation reads a neighbour.
  const int64_t top = std::clamp<int64_t>(floor_div(request.top, denom) - 1, 0, rows - 1);
  const int64_t bottom = std::clamp<int64_t>(ceil_div(request.top + request.height, denom) + 1, top + 1, rows);
  const int64_t left = std::clamp<int64_t>(floor_div(request.left, denom) - 1, 0, cols - 1);
  const int64_t right = std::clamp<int64_t>(ceil_div(request.left + request.width, denom) + 1, left + 1, cols);
  // The fancy (smooth) chroma upsampling of a cropped row lacks the
  // neighbour beyond each cut edge, so the outermost column there differs
  // from a full decode: one more column is decoded on each side and dropped.
  JDIMENSION x = static_cast<JDIMENSION>(std::max<int64_t>(left - 1, 0));
  JDIMENSION width = static_cast<JDIMENSION>(std::min<int64_t>(right + 1, cols)) - x;
  if (width < cols) jpeg_crop_scanline(cinfo, &x, &width);  // widens to whole iMCUs
  if (top > 0) jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(top));
  out.decoded.create(static_cast<int>(bottom - top), static_cast<int>(width), CV_8UC3);
  for (int r = 0; r < out.decoded.rows; ++r) {
    JSAMPROW row = out.decoded.ptr<uint8_t>(r);
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  const int cut_left = x > 0 ? 1 : 0, cut_right = x + width < cols ? 1 : 0;
  out.bgr = out.decoded.colRange(cut_left, static_cast<int>(width) - cut_right);
  out.top = top;
  out.left = x + cut_left;
  out.scale_denom = request.scale_denom;
  jpeg_abort_decompress(cinfo);  // rows below the region are never decoded
  return true;
}
}  // namespace

bool looks_like_jpeg(const uint8_t* data, size_t size) {
  return size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

std::string decode_jpeg(const uint8_t* data, size_t size,
                        const std::function<JpegRequest(int64_t height, int64_t width)>& choose, DecodedRegion& out) {
  Decompressor d;
  bool cmyk = false, too_large = false;
  if (run(d, data, size, choose, out, cmyk, too_large)) return "";
  if (cmyk) return kCmykJpeg;
  if (too_large) return "a JPEG of more than 2^30 pixels";
  return std::string("not a readable JPEG (") + d.err.message + ")";
}

}  // namespace poseidon
