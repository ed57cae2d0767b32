// safetensors: round trips, files built byte by byte as other writers make
// them, every kind of malformed input, writes that fail half way, and
// entries streamed in while writing or read in parts after.
#include "core/safetensors.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <bit>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "core/error.h"

namespace poseidon::testing {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "safetensors_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  static void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  static std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  // Reading `bytes` must fail with an Error naming the file and containing `why`.
  void expect_rejected(const std::string& bytes, const std::string& why) {
    std::string path = file("bad.safetensors");
    write_bytes(path, bytes);
    try {
      read_safetensors(path);
      ADD_FAILURE() << "accepted a file that should fail with '" << why << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }

  // What `write` throws while no file may grow past 4 KiB, failing half way
  // as on a full disk; empty when it throws nothing.
  static std::string error_with_full_disk(const std::function<void()>& write) {
    struct rlimit saved {};
    if (::getrlimit(RLIMIT_FSIZE, &saved) != 0) return "cannot read the file size limit";
    auto saved_handler = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limited = saved;
    limited.rlim_cur = 4096;
    std::string message;
    if (::setrlimit(RLIMIT_FSIZE, &limited) != 0) {
      message = "cannot set the file size limit";
    } else {
      try {
        write();
      } catch (const Error& e) {
        message = e.what();
      }
    }
    ::setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, saved_handler);
    return message;
  }

  std::vector<std::string> leftover_temp_files() const {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(dir_))
      if (entry.path().filename().string().find(".tmp.") != std::string::npos)
        out.push_back(entry.path().filename().string());
    return out;
  }

  fs::path dir_;
};

// A file as any writer lays it out: length, header, data.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  uint64_t n = header.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

template <class T>
std::string raw(std::initializer_list<T> values) {
  std::string out;
  for (T v : values) out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return out;
}

Tensor tensor_of(const Shape& shape, float first) {
  Tensor t(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = first + 0.5f * static_cast<float>(i);
  return t;
}

TEST_F(SafetensorsTest, RoundTripsTensorsAndMetadata) {
  Tensor weight = tensor_of({3, 2, 2}, -1.25f), bias = tensor_of({3}, 7.f), scalar = tensor_of({}, 42.f);
  Tensor empty({0, 4});
  std::map<std::string, std::string> meta = {{"iteration", "17"}, {"rng", "1 2 3"}};
  std::string path = file("rt.safetensors");
  write_safetensors(path, {{"conv.weight", &weight}, {"conv.bias", &bias}, {"step", &scalar}, {"none", &empty}}, meta);

  SafetensorsFile f = read_safetensors(path);
  EXPECT_EQ(f.metadata, meta);
  ASSERT_EQ(f.tensors.size(), 4u);
  for (auto [name, t] : {std::pair<std::string, Tensor*>{"conv.weight", &weight}, {"conv.bias", &bias},
                         {"step", &scalar}, {"none", &empty}}) {
    const SafetensorsTensor& got = f.tensors.at(name);
    EXPECT_EQ(got.shape, t->shape()) << name;
    ASSERT_EQ(got.data.size(), static_cast<size_t>(t->numel())) << name;
    for (int64_t i = 0; i < t->numel(); ++i) EXPECT_EQ(got.data[i], (*t)[i]) << name << "[" << i << "]";
  }
  EXPECT_TRUE(leftover_temp_files().empty());
}

TEST_F(SafetensorsTest, WritesAlignedHeaderAndExactDataSize) {
  Tensor t = tensor_of({5}, 1.f);
  std::string path = file("layout.safetensors");
  write_safetensors(path, {{"x", &t}}, {});
  std::string bytes = read_bytes(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u) << "data must start 8-byte aligned";
  EXPECT_EQ(bytes.size(), 8 + n + 5 * sizeof(float));
  EXPECT_NE(bytes.find("\"dtype\":\"F32\""), std::string::npos);
  EXPECT_EQ(bytes.find("__metadata__"), std::string::npos) << "no metadata was given";
}

TEST_F(SafetensorsTest, ReadsOtherDtypesFromHandBuiltFile) {
  std::string data = raw<double>({1.5, -2.25}) + raw<int64_t>({-3, 1LL << 40}) + raw<int32_t>({-7, 9}) +
                     raw<uint16_t>({0x3C00, 0xC000, 0x0001, 0x7C00}) +  // F16: 1, -2, 2^-24, +inf
                     raw<uint16_t>({0x3F80, 0x4049});                   // BF16: 1, 3.140625
  std::string header =
      R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"I64","shape":[2,1],"data_offsets":[16,32]},)"
      R"("c":{"dtype":"I32","shape":[2],"data_offsets":[32,40]},)"
      R"("d":{"dtype":"F16","shape":[4],"data_offsets":[40,48]},)"
      R"("e":{"dtype":"BF16","shape":[1,2],"data_offsets":[48,52]},)"
      R"("__metadata__":{"format":"pt"}})";
  std::string path = file("torch.safetensors");
  write_bytes(path, safetensors_bytes(header, data));

  SafetensorsFile f = read_safetensors(path);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_EQ(f.tensors.at("a").data, (std::vector<float>{1.5f, -2.25f}));
  EXPECT_EQ(f.tensors.at("b").shape, (Shape{2, 1}));
  EXPECT_EQ(f.tensors.at("b").data, (std::vector<float>{-3.f, 1099511627776.f}));
  EXPECT_EQ(f.tensors.at("c").data, (std::vector<float>{-7.f, 9.f}));
  EXPECT_EQ(f.tensors.at("d").data, (std::vector<float>{1.f, -2.f, std::ldexp(1.f, -24), INFINITY}));
  EXPECT_EQ(f.tensors.at("e").data, (std::vector<float>{1.f, 3.140625f}));
}

TEST_F(SafetensorsTest, MissingFileNamesThePath) {
  std::string path = file("absent.safetensors");
  try {
    read_safetensors(path);
    FAIL() << "read a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST_F(SafetensorsTest, RejectsMalformedFiles) {
  const std::string ok_entry = R"("x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string data = raw<float>({1.f, 2.f});
  expect_rejected("", "shorter than the 8-byte header length");
  expect_rejected(std::string("\x05\0\0", 3), "shorter than the 8-byte header length");
  expect_rejected(safetensors_bytes("{" + ok_entry + "}", data).substr(0, 8), "exceeds");
  std::string huge_length(8, '\xff');
  expect_rejected(huge_length + "{}", "header length");
  expect_rejected(safetensors_bytes("{\"x\": [1,", data), "not valid JSON");
  expect_rejected(safetensors_bytes("", ""), "not valid JSON");
  expect_rejected(safetensors_bytes("[1, 2]", data), "must be a JSON object");
  expect_rejected(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", data),
                  "data truncated");
  expect_rejected(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,4]}})", data),
                  "end before they begin");
  expect_rejected(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data),
                  "needs 12");
  expect_rejected(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                    R"("y":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})",
                                    data),
                  "overlap");
  expect_rejected(safetensors_bytes(R"({"x":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", data),
                  "unsupported dtype 'C64'");
  expect_rejected(safetensors_bytes(R"({"x":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", data),
                  "\"dtype\" must be a string");
  expect_rejected(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data),
                  "non-negative integer");
  expect_rejected(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", data),
                  "non-negative integer");
  expect_rejected(
      safetensors_bytes(R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", data),
      "too large");
  expect_rejected(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", data),
                  "must be [begin, end]");
  expect_rejected(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[2]}})", data), "missing \"data_offsets\"");
  expect_rejected(safetensors_bytes(R"({"x":3})", data), "expected an object");
  expect_rejected(safetensors_bytes("{" + ok_entry + R"(,"__metadata__":{"k":1}})", data), "must be a string");
  expect_rejected(safetensors_bytes("{" + ok_entry + R"(,"__metadata__":[]})", data), "must be an object");
}

TEST_F(SafetensorsTest, RejectsEveryTruncationOfAValidFile) {
  Tensor t = tensor_of({2, 3}, 0.f);
  std::string path = file("whole.safetensors");
  write_safetensors(path, {{"t", &t}}, {{"k", "v"}});
  std::string bytes = read_bytes(path);
  for (size_t n = 0; n < bytes.size(); ++n) {
    write_bytes(path, bytes.substr(0, n));
    EXPECT_THROW(read_safetensors(path), Error) << "truncated to " << n << " of " << bytes.size() << " bytes";
  }
}

// Random byte corruption must end in a clean result or an Error, never a crash
// or another kind of exception.
TEST_F(SafetensorsTest, SurvivesCorruptedBytes) {
  Tensor a = tensor_of({4, 3}, 1.f), b = tensor_of({2}, -3.f);
  std::string path = file("fuzz.safetensors");
  write_safetensors(path, {{"a", &a}, {"b", &b}}, {{"iteration", "3"}});
  const std::string original = read_bytes(path);
  std::mt19937 rng(1234);
  int rejected = 0;
  for (int round = 0; round < 600; ++round) {
    std::string bytes = original;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    write_bytes(path, bytes);
    try {
      read_safetensors(path);
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
}

TEST_F(SafetensorsTest, FailedWriteKeepsOldFileAndLeavesNoTemporary) {
  Tensor old_value = tensor_of({4}, 1.f);
  std::string path = file("ckpt.safetensors");
  write_safetensors(path, {{"w", &old_value}}, {{"iteration", "1"}});
  const std::string old_bytes = read_bytes(path);

  Tensor big = tensor_of({1 << 16}, 0.f);
  const std::string message =
      error_with_full_disk([&] { write_safetensors(path, {{"w", &big}}, {{"iteration", "2"}}); });

  EXPECT_NE(message.find(path), std::string::npos) << "the write did not fail with an Error naming the file: "
                                                   << message;
  EXPECT_EQ(read_bytes(path), old_bytes);
  EXPECT_EQ(read_safetensors(path).metadata.at("iteration"), "1");
  EXPECT_TRUE(leftover_temp_files().empty());
}

TEST_F(SafetensorsTest, FailedRenameLeavesNoTemporary) {
  std::string path = file("occupied");
  fs::create_directory(path);
  fs::create_directory(path + "/inside");  // a non-empty directory cannot be replaced by a file
  Tensor t = tensor_of({2}, 0.f);
  try {
    write_safetensors(path, {{"t", &t}}, {});
    FAIL() << "wrote over a directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_directory(path + "/inside"));
  EXPECT_TRUE(leftover_temp_files().empty());
}

TEST_F(SafetensorsTest, RejectsDuplicateAndReservedNames) {
  Tensor t = tensor_of({1}, 0.f);
  EXPECT_THROW(write_safetensors(file("dup"), {{"t", &t}, {"t", &t}}, {}), Error);
  EXPECT_THROW(write_safetensors(file("meta"), {{"__metadata__", &t}}, {}), Error);
  EXPECT_FALSE(fs::exists(file("dup")));
}

// A streamed entry handing over `t`'s numbers `piece` at a time, counting the calls to produce.
StreamedTensor streamed_of(const std::string& name, const Tensor& t, size_t piece, int* produced = nullptr) {
  return {name, t.shape(), [&t, piece, produced](const StreamedTensor::Writer& write) {
            if (produced) ++*produced;
            for (size_t at = 0; at < static_cast<size_t>(t.numel()); at += piece)
              write(t.data() + at, std::min(piece, static_cast<size_t>(t.numel()) - at));
          }};
}

TEST_F(SafetensorsTest, StreamedEntriesWriteTheSameBytesAsWholeTensors) {
  Tensor a = tensor_of({3, 4}, 1.f), b = tensor_of({7}, -2.f);
  write_safetensors(file("whole"), {{"a", &a}, {"b", &b}}, {{"k", "v"}});
  write_safetensors(file("streamed"), {{"a", &a}}, {{"k", "v"}}, {streamed_of("b", b, 3)});
  EXPECT_EQ(read_bytes(file("streamed")), read_bytes(file("whole")));
}

TEST_F(SafetensorsTest, DeferredEntriesReadInPartsFromTheFileAsOpened) {
  Tensor big = tensor_of({4, 5}, 0.f), small = tensor_of({2}, 9.f);
  const std::string path = file("parts.safetensors");
  write_safetensors(path, {{"big", &big}, {"small", &small}}, {});
  SafetensorsFile f = read_safetensors(path, [](const std::string& name) { return name == "big"; });
  EXPECT_EQ(f.tensors.count("big"), 0u);
  EXPECT_EQ(f.tensors.at("small").data, (std::vector<float>{9.f, 9.5f}));
  ASSERT_EQ(f.deferred.count("big"), 1u);
  EXPECT_EQ(f.deferred.at("big").shape(), (Shape{4, 5}));
  // Another file renamed over the path changes nothing for the opened one.
  Tensor other = tensor_of({4, 5}, 100.f);
  write_safetensors(path, {{"big", &other}, {"small", &small}}, {});
  std::vector<float> part(6);
  f.deferred.at("big").read(7, 6, part.data());
  EXPECT_EQ(part, (std::vector<float>(big.data() + 7, big.data() + 13)));
  EXPECT_THROW(f.deferred.at("big").read(15, 6, part.data()), InternalError) << "read past the entry's end";
}

TEST_F(SafetensorsTest, DeferredEntriesOfOtherDtypesConvertPartByPart) {
  std::string header = R"({"h":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})";
  std::string path = file("half.safetensors");
  write_bytes(path, safetensors_bytes(header, raw<uint16_t>({0x3C00, 0xC000, 0x0001, 0x7C00})));
  SafetensorsFile f = read_safetensors(path, [](const std::string&) { return true; });
  std::vector<float> part(2);
  f.deferred.at("h").read(1, 2, part.data());
  EXPECT_EQ(part, (std::vector<float>{-2.f, std::ldexp(1.f, -24)}));
}

TEST_F(SafetensorsTest, FailedWriteStillRunsEveryProducerAndKeepsTheOldFile) {
  Tensor old_value = tensor_of({4}, 1.f);
  std::string path = file("ckpt.safetensors");
  write_safetensors(path, {{"w", &old_value}}, {{"iteration", "1"}});
  const std::string old_bytes = read_bytes(path);

  Tensor big = tensor_of({1 << 16}, 0.f), after = tensor_of({8}, 0.f);
  int produced = 0;
  const std::string message = error_with_full_disk([&] {
    write_safetensors(path, {}, {{"iteration", "2"}},
                      {streamed_of("big", big, 1000, &produced), streamed_of("after", after, 8, &produced)});
  });

  EXPECT_NE(message.find(path), std::string::npos) << "the write did not fail with an Error naming the file: "
                                                   << message;
  EXPECT_EQ(produced, 2) << "a producer after the failure did not run";
  EXPECT_EQ(read_bytes(path), old_bytes);
  EXPECT_TRUE(leftover_temp_files().empty());
}

TEST_F(SafetensorsTest, StreamedEntryOfTheWrongSizeIsRefusedAndLeavesNoFile) {
  Tensor t = tensor_of({5}, 0.f);
  StreamedTensor short_one{"s", Shape{6}, [&t](const StreamedTensor::Writer& write) { write(t.data(), 5); }};
  try {
    write_safetensors(file("short"), {}, {}, {short_one});
    FAIL() << "wrote 5 numbers for a tensor of 6";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 's' [6] was given 5 numbers"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(file("short")));
  EXPECT_TRUE(leftover_temp_files().empty());
}

}  // namespace
}  // namespace poseidon::testing
