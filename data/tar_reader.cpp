// Tar parsing: 512-byte headers with octal (or base-256) sizes, a checksum
// that tells a header from damaged data, GNU long names (type L) and PAX
// extended headers (type x: the `path` and `size` records; type g ignored).
#include "data/tar_reader.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace poseidon {

namespace {
constexpr uint64_t kBlock = 512;

uint64_t padded(uint64_t size) { return (size + kBlock - 1) / kBlock * kBlock; }

// An octal field (NUL or space terminated), or GNU's base-256 form (high bit set).
bool parse_number(const uint8_t* field, size_t length, uint64_t& value) {
  value = 0;
  if (field[0] & 0x80) {
    for (size_t i = 1; i < length; ++i) {
      if (value >> 55) return false;
      value = (value << 8) | field[i];
    }
    return (field[0] & 0x7F) == 0;
  }
  size_t i = 0;
  while (i < length && field[i] == ' ') ++i;
  for (; i < length && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (value >> 60) return false;
    value = value * 8 + (field[i] - '0');
  }
  return i == length || field[i] == 0 || field[i] == ' ';
}

std::string field_text(const uint8_t* field, size_t length) {
  const auto* end = static_cast<const uint8_t*>(std::memchr(field, 0, length));
  return std::string(reinterpret_cast<const char*>(field), end ? static_cast<size_t>(end - field) : length);
}

bool checksum_matches(const uint8_t* header) {
  uint64_t stored = 0;
  if (!parse_number(header + 148, 8, stored)) return false;
  uint64_t sum = 0;
  for (uint64_t i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? ' ' : header[i];
  return sum == stored;
}

// PAX records "LEN key=value\n"; takes `path` and `size`.
void read_pax(const std::string& text, std::string& path, uint64_t& size, bool& has_size) {
  size_t at = 0;
  while (at < text.size()) {
    const size_t space = text.find(' ', at);
    if (space == std::string::npos) return;
    uint64_t length = 0;
    for (size_t i = at; i < space; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(text[i])) || length > text.size()) return;
      length = length * 10 + (text[i] - '0');
    }
    if (length <= space - at + 1 || at + length > text.size()) return;
    const std::string record = text.substr(space + 1, at + length - space - 2);  // without the newline
    const size_t eq = record.find('=');
    if (eq != std::string::npos) {
      const std::string key = record.substr(0, eq), value = record.substr(eq + 1);
      if (key == "path") path = value;
      if (key == "size") {
        uint64_t v = 0;
        bool digits = !value.empty() && value.size() < 19;
        for (char ch : value) digits = digits && std::isdigit(static_cast<unsigned char>(ch));
        if (digits) {
          for (char ch : value) v = v * 10 + (ch - '0');
          size = v;
          has_size = true;
        }
      }
    }
    at += length;
  }
}
}  // namespace

std::string list_tar(const ReadAt& read_at, uint64_t archive_size, std::vector<TarMember>& members) {
  members.clear();
  uint8_t header[kBlock];
  std::string long_name, pax_path;
  uint64_t pax_size = 0;
  bool pax_has_size = false;
  uint64_t at = 0;
  const auto where = [&](const std::string& name) {
    return "member '" + name + "' (at byte " + std::to_string(at) + ")";
  };
  while (at + kBlock <= archive_size) {
    if (read_at(at, kBlock, header) != kBlock) return "cannot read the header at byte " + std::to_string(at);
    if (std::all_of(header, header + kBlock, [](uint8_t b) { return b == 0; })) return "";  // end of archive
    if (!checksum_matches(header))
      return "the header at byte " + std::to_string(at) +
             " is damaged (bad checksum): not a tar file, or cut or corrupt";
    std::string name = field_text(header, 100);
    const std::string prefix = field_text(header + 345, 155);
    // POSIX ustar ("ustar\0") has a name prefix there; GNU's ("ustar ") has times.
    if (std::memcmp(header + 257, "ustar", 6) == 0 && !prefix.empty()) name = prefix + "/" + name;
    uint64_t size = 0;
    if (!parse_number(header + 124, 12, size)) return where(name) + ": its size field is not a number";
    const char type = static_cast<char>(header[156]);
    const bool extension = type == 'L' || type == 'x' || type == 'g';
    if (pax_has_size && !extension) size = pax_size;  // the size a PAX header gave the member after it
    const uint64_t data = at + kBlock;
    if (size > archive_size || data + size > archive_size)
      return where(name.empty() ? long_name : name) + " needs " + std::to_string(size) +
             " bytes but the file ends after " + std::to_string(archive_size - std::min(archive_size, data)) +
             ": the tar is cut short";
    if (type == 'L' || type == 'x') {
      if (size > (uint64_t{1} << 20)) return where(name) + ": an extended header of more than 1 MiB";
      std::string text(size, '\0');
      if (read_at(data, size, reinterpret_cast<uint8_t*>(text.data())) != size) return where(name) + ": cannot be read";
      if (type == 'L') {
        long_name = text.substr(0, text.find('\0'));
      } else {
        read_pax(text, pax_path, pax_size, pax_has_size);
      }
    } else {
      if (type == '0' || type == '\0' || type == '7') {
        const std::string full = !pax_path.empty() ? pax_path : !long_name.empty() ? long_name : name;
        members.push_back({full, data, size});
      }
      long_name.clear();
      pax_path.clear();
      pax_has_size = false;
    }
    at = data + padded(size);
  }
  if (at < archive_size)
    return "the file ends inside a header at byte " + std::to_string(at) + ": the tar is cut short";
  return "";  // ends on a member boundary without the end-of-archive blocks, as some writers leave it
}

std::string member_extension(const std::string& name) {
  const size_t base = name.find_last_of('/') == std::string::npos ? 0 : name.find_last_of('/') + 1;
  const size_t dot = name.find('.', base);
  if (dot == std::string::npos) return "";
  std::string ext = name.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return ext;
}

std::vector<TarExample> group_by_key(const std::vector<TarMember>& members) {
  std::vector<TarExample> examples;
  for (size_t i = 0; i < members.size(); ++i) {
    const std::string& name = members[i].name;
    const size_t base = name.find_last_of('/') == std::string::npos ? 0 : name.find_last_of('/') + 1;
    const std::string key = name.substr(0, name.find('.', base));
    if (examples.empty() || examples.back().key != key) examples.push_back({key, {}});
    examples.back().members.push_back(i);
  }
  return examples;
}

void write_tar(const std::string& path, const std::vector<std::pair<std::string, std::string>>& files) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path + ": cannot open for writing");
  const char zeros[kBlock] = {};
  for (const auto& [name, bytes] : files) {
    POSEIDON_REQUIRE(!name.empty() && name.size() <= 100) << "tar member name '" << name << "' is not 1 to 100 bytes";
    char header[kBlock] = {};
    std::memcpy(header, name.data(), name.size());
    std::snprintf(header + 100, 8, "%07o", 0644);
    std::snprintf(header + 108, 8, "%07o", 0);
    std::snprintf(header + 116, 8, "%07o", 0);
    std::snprintf(header + 124, 12, "%011llo", static_cast<unsigned long long>(bytes.size()));
    std::snprintf(header + 136, 12, "%011o", 0);
    header[156] = '0';
    std::memcpy(header + 257, "ustar", 6);
    std::memcpy(header + 263, "00", 2);
    std::memset(header + 148, ' ', 8);
    unsigned sum = 0;
    for (char ch : header) sum += static_cast<unsigned char>(ch);
    std::snprintf(header + 148, 8, "%06o", sum);
    header[155] = ' ';
    out.write(header, kBlock);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.write(zeros, static_cast<std::streamsize>(padded(bytes.size()) - bytes.size()));
  }
  out.write(zeros, kBlock);
  out.write(zeros, kBlock);
  if (!out.flush()) throw Error(path + ": cannot write (disk full?)");
}

}  // namespace poseidon
