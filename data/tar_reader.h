// Tar archives as WebDataset stores examples in them: the regular files of
// an archive in the ustar, GNU and PAX forms (the forms Python's tarfile and
// GNU tar write), and their grouping into examples by key (the member name up
// to the first dot of its last path component: `a/b.0.jpg` has key `a/b`
// and extension `0.jpg`).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace poseidon {

struct TarMember {
  std::string name;
  uint64_t offset = 0;  // of its data in the archive
  uint64_t size = 0;
};

// Reads up to `size` bytes at `offset` into `dst`; returns how many it read
// (fewer at the end of the archive).
using ReadAt = std::function<size_t(uint64_t offset, size_t size, uint8_t* dst)>;

// Lists the regular files of an archive of `archive_size` bytes. Returns ""
// when the whole archive was read, else what stopped the listing (a member
// that goes past the end of the file, a damaged header), naming the member;
// `members` then holds those before it.
std::string list_tar(const ReadAt& read_at, uint64_t archive_size, std::vector<TarMember>& members);

// One example: the members that share a key, in archive order.
struct TarExample {
  std::string key;
  std::vector<size_t> members;  // indices into the member list
};
std::vector<TarExample> group_by_key(const std::vector<TarMember>& members);
// The extension of a member name (lower case), "" when it has none.
std::string member_extension(const std::string& name);

// Writes a tar archive in the ustar form, one regular file per (name, bytes),
// names of at most 100 bytes. Throws Error naming `path` when it cannot.
void write_tar(const std::string& path, const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace poseidon
