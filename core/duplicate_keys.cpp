// Duplicate-key detection on yaml-cpp's parser events.
#include "core/duplicate_keys.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace poseidon {

namespace {

// Follows the nesting of maps and sequences; in a map, nodes alternate
// between key and value.
class DuplicateKeyFinder : public YAML::EventHandler {
 public:
  explicit DuplicateKeyFinder(std::string file) : file_(std::move(file)) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override { leaf(""); }
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { leaf(""); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string& value) override {
    if (!frames_.empty() && frames_.back().is_map && frames_.back().expecting_key) check_key(value, mark);
    leaf(value);
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(false);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(true);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Frame {
    bool is_map = false;
    bool expecting_key = true;  // maps: the next node is a key
    std::string path;           // of this map or sequence
    std::string key;            // maps: the key whose value comes next
    size_t index = 0;           // sequences: the next element's index
    std::map<std::string, YAML::Mark> keys;
  };

  // The path of the node that starts now, inside the innermost frame.
  std::string child_path() const {
    if (frames_.empty()) return "";
    const Frame& f = frames_.back();
    if (!f.is_map) return f.path + "[" + std::to_string(f.index) + "]";
    return f.path.empty() ? f.key : f.path + "." + f.key;
  }

  void check_key(const std::string& key, const YAML::Mark& mark) {
    Frame& f = frames_.back();
    auto [it, inserted] = f.keys.emplace(key, mark);
    if (inserted) return;
    const std::string path = f.path.empty() ? key : f.path + "." + key;
    throw ConfigError({file_, mark.line + 1, mark.column + 1, path},
                      "duplicate key '" + key + "' (first at line " + std::to_string(it->second.line + 1) +
                          ", column " + std::to_string(it->second.column + 1) +
                          "); a key may appear once in a map");
  }

  // A node without children ended: the enclosing map moves between key and value.
  void leaf(const std::string& scalar) {
    if (frames_.empty()) return;
    Frame& f = frames_.back();
    if (!f.is_map) {
      ++f.index;
      return;
    }
    if (f.expecting_key) {
      f.key = scalar;
    } else if (f.key == "name" && named_by(scalar)) {
      // A list element with a name is named by it, as ConfigNode names it ("layers.fc2").
      const Frame& list = frames_[frames_.size() - 2];
      f.path = list.path.empty() ? scalar : list.path + "." + scalar;
    }
    f.expecting_key = !f.expecting_key;
  }

  // Whether the map being read is a list element that `name` can name.
  bool named_by(const std::string& name) const {
    return frames_.size() >= 2 && !frames_[frames_.size() - 2].is_map && !name.empty() &&
           name.find('$') == std::string::npos;
  }

  void open(bool is_map) {
    Frame f;
    f.is_map = is_map;
    f.path = child_path();
    frames_.push_back(std::move(f));
  }

  void close() {
    frames_.pop_back();
    leaf("");  // a list or map as a key has no name to check
  }

  std::string file_;
  std::vector<Frame> frames_;
};

}  // namespace

void check_duplicate_keys(const std::string& text, const std::string& file) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DuplicateKeyFinder finder(file);
  parser.HandleNextDocument(finder);  // the first document, the one YAML::Load reads
}

}  // namespace poseidon
