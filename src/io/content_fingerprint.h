#pragma once
// What a run trained on, as checkpoint.json records it: a resumed run that would read other
// data (the same path rewritten, or another file where the old one was moved) is refused
// instead of silently training on something else.
#include <string>

namespace pipetrain {

// The size and CRC32C of the file at `path` ("1115394 bytes, crc32c 0a1b2c3d"), or, for a
// folder, of its regular files together, in name order, names included ("4 files, ..."). ""
// when `path` does not exist. UserError when it cannot be read.
std::string content_fingerprint(const std::string& path);

// data.path's fingerprint, found as the data readers find it: as given, else below `data_root`.
// Read once, when a run starts: its checkpoints record what it trained on, and a resume compares
// that with what it would train on.
std::string data_fingerprint(const std::string& data_path, const std::string& data_root);

}  // namespace pipetrain
