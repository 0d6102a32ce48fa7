// docs/architecture.md's dependency table is the code's: every `#include "folder/..."` in src/
// names a folder the table lets that folder include, and each folder includes only folders
// listed below it (so there is no cycle). Read from the files, so the document cannot drift.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/text.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

struct Row {
  std::string folder;
  std::set<std::string> includes;
};

// The table's rows in order, top to bottom: "runtime ──> train, model, ...  yes", "cli ──> every
// folder below but loss  via train", "core  no".
std::vector<Row> dependency_table() {
  const std::string doc = read_file(std::string(PIPETRAIN_SOURCE_DIR) + "/docs/architecture.md");
  const std::regex row(R"(^(\w+) (?:─)+> (.+?)\s{2,}\S.*$)"), bottom(R"(^(\w+)\s{2,}no$)");
  std::vector<Row> rows;
  std::vector<std::string> every_but;  // a row's "every folder below but X", resolved after
  for (const std::string& line : split(doc, '\n')) {
    std::smatch m;
    if (std::regex_match(line, m, row)) {
      std::string list = m[2];
      list = list.substr(0, list.find("  ("));
      Row r{m[1], {}};
      if (list.rfind("every folder below but ", 0) == 0) {
        every_but.push_back(r.folder + ":" + list.substr(23));
      } else {
        for (std::string name : split(list, ',')) {
          name.erase(0, name.find_first_not_of(' '));
          r.includes.insert(name.substr(0, name.find(' ')));
        }
      }
      rows.push_back(r);
    } else if (std::regex_match(line, m, bottom)) {
      rows.push_back({m[1], {}});
    }
  }
  for (const std::string& entry : every_but) {
    const std::string folder = entry.substr(0, entry.find(':')), but = entry.substr(entry.find(':') + 1);
    auto at = std::find_if(rows.begin(), rows.end(), [&](const Row& r) { return r.folder == folder; });
    for (auto below = at + 1; below != rows.end(); ++below) {
      if (below->folder != but) at->includes.insert(below->folder);
    }
  }
  return rows;
}

// folder -> the folders its files include ("folder/..." headers but its own).
std::map<std::string, std::set<std::string>> includes_in_src() {
  const std::regex include(R"(^#include "(\w+)/)");
  std::map<std::string, std::set<std::string>> found;
  for (const auto& entry : fs::recursive_directory_iterator(std::string(PIPETRAIN_SOURCE_DIR) + "/src")) {
    const auto extension = entry.path().extension();
    if (extension != ".h" && extension != ".cpp" && extension != ".cu") continue;
    const fs::path relative = fs::relative(entry.path(), std::string(PIPETRAIN_SOURCE_DIR) + "/src");
    if (relative.parent_path().empty()) continue;  // src/pipetrain.h: the whole library's header
    const std::string folder = relative.begin()->string();
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (std::regex_search(line, m, include) && m[1] != folder) found[folder].insert(m[1]);
    }
  }
  return found;
}

TEST(Architecture, EveryIncludeIsOneTheDependencyTableAllows) {
  const std::vector<Row> rows = dependency_table();
  ASSERT_GE(rows.size(), 15u) << "the table in docs/architecture.md was not found";
  std::map<std::string, std::set<std::string>> allowed;
  for (const Row& r : rows) allowed[r.folder] = r.includes;
  const auto found = includes_in_src();
  // Most folders include another's headers: an empty scan would check nothing.
  ASSERT_GE(found.size(), 10u) << "no cross-folder includes found under src/";
  for (const auto& [folder, includes] : found) {
    ASSERT_TRUE(allowed.count(folder)) << "src/" << folder << " is not in docs/architecture.md's table";
    for (const std::string& other : includes) {
      EXPECT_TRUE(allowed[folder].count(other)) << "src/" << folder << " includes " << other
                                                << "/ headers, which docs/architecture.md's table does not list";
    }
  }
}

TEST(Architecture, TheTableListsOnlyFoldersBelowEachRow) {
  const std::vector<Row> rows = dependency_table();
  ASSERT_GE(rows.size(), 15u);
  for (size_t i = 0; i < rows.size(); ++i) {
    for (const std::string& other : rows[i].includes) {
      const auto at = std::find_if(rows.begin(), rows.end(), [&](const Row& r) { return r.folder == other; });
      ASSERT_NE(at, rows.end()) << rows[i].folder << " lists an unknown folder '" << other << "'";
      EXPECT_GT(at - rows.begin(), ptrdiff_t(i)) << rows[i].folder << " lists " << other << ", which is above it";
      EXPECT_TRUE(fs::is_directory(std::string(PIPETRAIN_SOURCE_DIR) + "/src/" + other)) << other;
    }
  }
}

}  // namespace
}  // namespace pipetrain
