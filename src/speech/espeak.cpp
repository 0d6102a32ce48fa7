#include "speech/espeak.h"

#include <dlfcn.h>
#include <espeak-ng/speak_lib.h>

#include <cstdlib>

#include "core/error.h"

namespace pipetrain::speech {
namespace {

constexpr const char* kEspeakInstallHint =
    "install the Debian package espeak-ng (apt-get install espeak-ng libespeak-ng-dev)";

template <typename Function>
Function* espeak_symbol(void* library, const char* name) {
  void* symbol = ::dlsym(library, name);
  if (symbol == nullptr) fail("espeak-ng's library lacks {}: {}", name, kEspeakInstallHint);
  return reinterpret_cast<Function*>(symbol);
}

// espeak-ng hands synthesized audio to this callback in pieces; `wav` is null at the end.
int collect_espeak_samples(short* wav, int count, espeak_EVENT* events) {
  if (wav != nullptr && count > 0) {
    auto* samples = static_cast<std::vector<int16_t>*>(events->user_data);
    samples->insert(samples->end(), wav, wav + count);
  }
  return 0;
}

}  // namespace

struct Espeak::Functions {
  decltype(&espeak_Initialize) initialize;
  decltype(&espeak_SetSynthCallback) set_callback;
  decltype(&espeak_SetVoiceByName) set_voice;
  decltype(&espeak_SetParameter) set_parameter;
  decltype(&espeak_Synth) synth;
};

static void* open_espeak_library() {
  const char* override_name = std::getenv(kEspeakLibraryVariable);
  const std::string name =
      override_name != nullptr && *override_name != 0 ? override_name : "libespeak-ng.so.1";
  void* library = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) fail("espeak-ng is missing ({} not found): {}", name, kEspeakInstallHint);
  return library;
}

void require_espeak_library() { open_espeak_library(); }

Espeak& Espeak::instance() {
  static Espeak espeak;  // a failed construction throws and is tried again on the next call
  return espeak;
}

Espeak::Espeak() {
  void* library = open_espeak_library();
  static Functions functions{
      espeak_symbol<decltype(espeak_Initialize)>(library, "espeak_Initialize"),
      espeak_symbol<decltype(espeak_SetSynthCallback)>(library, "espeak_SetSynthCallback"),
      espeak_symbol<decltype(espeak_SetVoiceByName)>(library, "espeak_SetVoiceByName"),
      espeak_symbol<decltype(espeak_SetParameter)>(library, "espeak_SetParameter"),
      espeak_symbol<decltype(espeak_Synth)>(library, "espeak_Synth")};
  // DONT_EXIT: without it espeak-ng calls exit() when its voice data is missing.
  sample_rate_ = functions.initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, nullptr,
                                      espeakINITIALIZE_DONT_EXIT);
  if (sample_rate_ <= 0) {
    fail("espeak-ng cannot start (its voice data espeak-ng-data is missing?): {}",
         kEspeakInstallHint);
  }
  functions.set_callback(collect_espeak_samples);
  functions_ = &functions;
}

std::vector<int16_t> Espeak::speak(const std::string& text, const SpokenVoice& voice) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (functions_->set_voice(voice.voice.c_str()) != EE_OK) {
    fail("espeak-ng has no voice '{}' (espeak-ng --voices=en lists them; add a variant as "
         "en-us+f2)",
         voice.voice);
  }
  functions_->set_parameter(espeakRATE, voice.rate_wpm, 0);
  functions_->set_parameter(espeakPITCH, voice.pitch, 0);
  functions_->set_parameter(espeakRANGE, 50, 0);
  std::vector<int16_t> samples;
  const espeak_ERROR status = functions_->synth(text.c_str(), text.size() + 1, 0, POS_CHARACTER, 0,
                                                espeakCHARS_AUTO, nullptr, &samples);
  if (status != EE_OK) fail("espeak-ng could not speak \"{}\" (error {})", text, int(status));
  return samples;
}

}  // namespace pipetrain::speech
