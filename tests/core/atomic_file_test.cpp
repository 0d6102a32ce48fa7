// AtomicFile: a file appears whole under its name or not at all; failures are one-line
// UserErrors naming the file.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>

#include "core/atomic_file.h"
#include "core/error.h"
#include "../file_test_helpers.h"
#include "core/files.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

using test::fresh_folder;
using test::files_in;

using test::user_error_of;

TEST(AtomicFile, PiecesAppearWholeOnlyAtCommit) {
  const fs::path dir = fresh_folder("pipetrain_atomic_pieces");
  const std::string path = (dir / "file.bin").string();
  write_file_atomically(path, "old");
  {
    AtomicFile file(path);
    file.write("new ");
    file.write("content");
    EXPECT_EQ(read_file(path), "old");  // until the commit
    file.commit();
  }
  EXPECT_EQ(read_file(path), "new content");
  EXPECT_EQ(files_in(dir), 1u);  // no temporary left
  fs::remove_all(dir);
}

TEST(AtomicFile, AbandonedWriteLeavesTheOldFileAndNoTemporary) {
  const fs::path dir = fresh_folder("pipetrain_atomic_abandoned");
  const std::string path = (dir / "file.bin").string();
  write_file_atomically(path, "old");
  {
    AtomicFile file(path);
    file.write("half of the new");
  }  // an error before the commit
  EXPECT_EQ(read_file(path), "old");
  EXPECT_EQ(files_in(dir), 1u);
  fs::remove_all(dir);
}

TEST(AtomicFile, MissingFolderIsAUserErrorNamingTheFile) {
  const std::string path = "/nonexistent-pipetrain-folder/file.bin";
  EXPECT_EQ(user_error_of([&] { AtomicFile file(path); }),
            "cannot write '" + path + "': No such file or directory");
}

// A full disk, imitated by a file-size limit: write() fails with EFBIG as it would with ENOSPC.
TEST(AtomicFile, FullDiskIsAUserErrorNamingTheFileAndLeavesTheOldOne) {
  const fs::path dir = fresh_folder("pipetrain_atomic_full");
  const std::string path = (dir / "file.bin").string();
  write_file_atomically(path, "old");
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto saved_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit limited = saved;
  limited.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  const std::string message = user_error_of([&] {
    AtomicFile file(path);
    file.write(std::string(10000, 'x'));
    file.commit();
  });
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, saved_handler);
  EXPECT_EQ(message, "cannot write '" + path + "': File too large");
  EXPECT_EQ(read_file(path), "old");
  EXPECT_EQ(files_in(dir), 1u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pipetrain
