#pragma once
// File-system helpers with user-facing errors: nothing half-written is ever left behind.
#include <cstdint>
#include <string>
#include <string_view>

namespace pipetrain {

// Writes `bytes` to `path` via a temporary file in the same folder, fsync, then rename,
// so a crash leaves either the old file or the new one, never a torn one.
void write_file_atomically(const std::string& path, std::string_view bytes);

std::string read_file(const std::string& path);  // UserError if missing, unreadable, a folder, a FIFO or a device

// A file the user names (config, data): its size, or UserError naming `what` ("data file") when
// it is missing, a folder, or not a regular file (a device such as /dev/zero never ends).
uint64_t regular_file_size(const std::string& path, const std::string& what);
// Reads such a file whole, after the same checks.
std::string read_regular_file(const std::string& path, const std::string& what);
// ::open for reading (O_CLOEXEC) that never waits: O_NONBLOCK, so a FIFO without a writer opens
// at once instead of hanging the run, and the caller's fstat refuses it as not a regular file
// (for a regular file the flag changes nothing). -1 with errno, as ::open.
int open_without_waiting(const std::string& path);

// Reading a memory-mapped file that shrank under the process (a token file rewritten in place,
// as llm.c's scripts do, or truncated) raises SIGBUS, which killed the run without a word. After
// this (idempotent; the mapping readers call it) SIGBUS writes one error line naming the cause,
// where errors go (stderr, or a launched worker's error file), and exits 2.
void report_shrunk_mapped_files();

// Creates `dir` (and parents) and checks that a file can be written in it.
// Refuses a folder that already holds a run (metrics.jsonl) unless `overwrite`.
void prepare_run_dir(const std::string& dir, bool overwrite);

// A fresh folder name under `parent`: parent/run-YYYYmmdd-HHMMSS[-N].
std::string new_run_dir_name(const std::string& parent);

// UserError when writing `output` would overwrite `input` (the same file however it is named: a
// relative path, a link), before anything is written. `option` names the output's flag.
void refuse_writing_over_input(const std::string& output, const std::string& input,
                               const std::string& option);

// Resolves a data path: as given if it exists, else relative to `fallback_root`.
std::string resolve_existing_path(const std::string& path, const std::string& fallback_root);
// The same without failing: as given if it exists, else below `root` if that exists, else as
// given (for the reader's own message, or a fingerprint of nothing).
std::string path_or_below_root(const std::string& path, const std::string& root);

// UserError unless `path` is a folder, after `prefix` ("--resume: "): "'P' is a file, not a
// WHAT (the folder holding HOLDS)", or "WHAT 'P' does not exist".
void require_folder(const std::string& path, const std::string& what, const std::string& holds,
                    const std::string& prefix = "");

// Before long work whose result goes to `path`: UserError naming `option` ("--out") when its
// folder does not exist or is not writable, or `path` is a folder, so the work is not lost at
// the end. (An empty path: nothing to check.)
void require_writable_output(const std::string& path, const std::string& option);

}  // namespace pipetrain
