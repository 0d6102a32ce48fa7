#include "data/tokenize.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/text.h"
#include "core/stop_signal.h"
#include "data/sha256.h"
#include "data/token_file.h"
#include "data/token_set.h"

namespace fs = std::filesystem;

namespace pipetrain {
namespace {

constexpr int64_t kBlockBytes = 1 << 16;

// The first safe cut at or after `target`: the validation split starts there.
int64_t split_offset(std::ifstream& in, int64_t size, int64_t target) {
  if (target <= 0) return 0;
  const int64_t from = target - 1;  // one byte back: a cut is judged by the bytes on both sides
  std::string window;
  for (int64_t begin = from; begin < size; begin += kBlockBytes) {
    window.resize(size_t(std::min<int64_t>(kBlockBytes + 1, size - begin)));
    in.seekg(begin);
    in.read(window.data(), std::streamsize(window.size()));
    for (size_t at = 1; at < window.size(); ++at) {  // both sides of the cut are in view
      if (is_safe_cut(window, at)) return begin + int64_t(at);
    }
  }
  return size;
}

// The last safe cut in text[from, size]; 0 if none. Cuts before `from` were already refused.
size_t last_safe_cut(std::string_view text, size_t from) {
  for (size_t at = text.size(); at >= std::max<size_t>(from, 1); --at) {
    if (is_safe_cut(text, at)) return at;
  }
  return 0;
}

struct Encoder {
  const Tokenizer& tokenizer;
  std::ifstream& in;
  TokenizeProgress& done;
  const std::function<void(const TokenizeProgress&)>& progress;

  // Bytes [begin, end) of the text into `out`, in blocks that end at safe cuts.
  void encode_range(int64_t begin, int64_t end, TokenFileWriter& out) {
    in.seekg(begin);
    std::string pending;
    int64_t offset = begin;
    while (offset < end || !pending.empty()) {
      const int64_t want = std::min(kBlockBytes, end - offset);
      const size_t old = pending.size();
      if (want > 0) {
        pending.resize(old + size_t(want));
        if (!in.read(pending.data() + old, want))
          fail("cannot read the text: {}", std::strerror(errno));
        offset += want;
      }
      const size_t cut = offset < end ? last_safe_cut(pending, old) : pending.size();
      if (cut == 0) continue;  // one long word so far: read on to a place where it ends
      if (const int signal = stop_signal(); signal != 0) {  // the writers' temporaries go with them
        throw StopRequested{signal, fmt::format("tokenize stopped by {}; no token files written",
                                                stop_signal_name(signal))};
      }
      const auto ids = tokenizer.encode(std::string_view(pending).substr(0, cut));
      out.append(ids);
      pending.erase(0, cut);
      done.bytes_done += int64_t(cut);
      done.tokens += int64_t(ids.size());
      progress(done);
    }
  }
};

// The whole text is UTF-8, checked before anything is written: SentencePiece replaces invalid
// bytes with U+FFFD, so their token files would not decode to the text (docs/data.md promises
// they do). One line naming the first bad byte's offset and line.
void refuse_invalid_utf8(std::ifstream& in, int64_t size, const std::string& path) {
  std::string block(size_t(kBlockBytes) + 3, '\0');
  int64_t offset = 0, line = 1;
  size_t carried = 0;  // an incomplete sequence at the end of the previous block
  while (offset < size) {
    const auto want = std::min<int64_t>(kBlockBytes, size - offset);
    if (!in.read(block.data() + carried, want)) fail("cannot read '{}': {}", path, std::strerror(errno));
    const size_t filled = carried + size_t(want);
    const bool last = offset + want == size;
    size_t i = 0;
    while (i < filled) {
      const auto byte = static_cast<unsigned char>(block[i]);
      const size_t length = utf8_sequence_length(byte);
      if (length != 0 && i + length > filled && !last) break;  // completed by the next block
      if (i + length > filled || !utf8_sequence_valid(block.data() + i, length)) {
        fail("'{}' is not valid UTF-8 at byte {} (line {}): tokenize reads UTF-8 text, and the "
             "tokenizer would turn those bytes into U+FFFD, so the token files would not decode to "
             "the text; convert it first (e.g. iconv -f LATIN1 -t UTF-8)",
             path, offset - int64_t(carried) + int64_t(i), line);
      }
      if (byte == '\n') ++line;
      i += length;
    }
    carried = filled - i;
    std::copy(block.begin() + std::ptrdiff_t(i), block.begin() + std::ptrdiff_t(filled), block.begin());
    offset += want;
  }
  in.clear();
}

}  // namespace

void remove_stale_token_temporaries(const std::string& out_dir) {
  std::error_code error;
  if (!fs::is_directory(out_dir, error)) return;
  for (const auto& entry : fs::directory_iterator(out_dir, error)) {
    const std::string name = entry.path().filename().string();
    for (const std::string file : {"train.bin", "val.bin", "tokens.json"}) {
      const std::string prefix = file + ".tmp.";
      if (name.rfind(prefix, 0) != 0) continue;
      const std::string pid = name.substr(prefix.size());
      if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
      // Only a dead writer's: another tokenize writing into the folder keeps its own.
      if (::kill(pid_t(std::stol(pid)), 0) != 0 && errno == ESRCH) fs::remove(entry.path(), error);
    }
  }
}

void refuse_invalid_utf8_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read '{}': {}", path, std::strerror(errno));
  refuse_invalid_utf8(in, int64_t(fs::file_size(path)), path);
}

bool is_safe_cut(std::string_view text, size_t at) {
  return at > 0 && at <= text.size() &&
         (text[at - 1] == '\n' || (at < text.size() && text[at] == ' '));
}

TokenizeResult tokenize_text_file(const Tokenizer& tokenizer, const TokenizeOptions& options,
                                  const std::function<void(const TokenizeProgress&)>& progress) {
  if (!fs::is_regular_file(options.text_path)) fail("text file '{}' not found", options.text_path);
  std::ifstream in(options.text_path, std::ios::binary);
  if (!in) fail("cannot read '{}': {}", options.text_path, std::strerror(errno));
  const auto size = int64_t(fs::file_size(options.text_path));
  if (size == 0) fail("text file '{}' is empty", options.text_path);
  refuse_invalid_utf8(in, size, options.text_path);
  in.seekg(0);
  std::error_code error;
  fs::create_directories(options.out_dir, error);
  if (error) fail("cannot create folder '{}': {}", options.out_dir, error.message());
  remove_stale_token_temporaries(options.out_dir);

  const auto held_out = int64_t(std::floor(double(size) * options.val_fraction));
  const int64_t split = split_offset(in, size, size - held_out);
  TokenizeResult result;
  result.text_bytes = size;
  result.token_bytes = token_bytes_for_vocab(tokenizer.vocab_size());
  TokenizeProgress done{0, size, 0};
  Encoder encoder{tokenizer, in, done, progress};
  const fs::path dir(options.out_dir);
  TokenFileWriter train((dir / "train.bin").string(), result.token_bytes);
  TokenFileWriter val((dir / "val.bin").string(), result.token_bytes);
  encoder.encode_range(0, split, train);
  encoder.encode_range(split, size, val);
  result.train_tokens = train.count();
  result.val_tokens = val.count();
  if (result.train_tokens == 0 || result.val_tokens == 0) {
    fail(
        "'{}': the {} split has no tokens (val_fraction {:g} of {} bytes, split at a line "
        "start or a space)",
        options.text_path, result.train_tokens == 0 ? "training" : "validation",
        options.val_fraction, size);
  }
  train.finish();
  val.finish();

  TokenSetInfo info;
  info.tokenizer_file = tokenizer.path();
  info.tokenizer_sha256 = sha256_hex_of_file(tokenizer.path());
  info.vocab_size = tokenizer.vocab_size();
  info.source_file = options.text_path;
  info.source_bytes = size;
  info.val_fraction = options.val_fraction;
  info.train_tokens = result.train_tokens;
  info.val_tokens = result.val_tokens;
  write_token_set_info((dir / kTokenSetInfoFile).string(), info);
  return result;
}

}  // namespace pipetrain
