// llama.cpp's side of the exactness check (bench/llama_cpp/side_by_side.sh): loads a GGUF,
// evaluates a prompt given as token ids, and decodes greedily, printing the ids, so that they
// can be compared with `origami generate --temperature 0` on the same model. Built by
// side_by_side.sh against a llama.cpp build (scripts/install-llama-cpp.sh), not by CMake.
//
//   llama_greedy MODEL.gguf THREADS NEW_TOKENS ID [ID ...]   -> the new ids, one line
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "llama.h"

static void quiet(ggml_log_level level, const char* text, void*) {
  if (level >= GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s MODEL.gguf THREADS NEW_TOKENS ID [ID ...]\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[2]), new_tokens = std::atoi(argv[3]);
  std::vector<llama_token> prompt;
  for (int i = 4; i < argc; ++i) prompt.push_back(std::atoi(argv[i]));

  llama_log_set(quiet, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.progress_callback = [](float, void*) { return true; };  // no progress dots
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) {
    std::fprintf(stderr, "%s: cannot load %s\n", argv[0], argv[1]);
    return 1;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(prompt.size() + new_tokens + 8);
  cp.n_batch = cp.n_ctx;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  llama_context* ctx = llama_init_from_model(model, cp);
  const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

  llama_batch batch = llama_batch_get_one(prompt.data(), static_cast<int32_t>(prompt.size()));
  llama_token next = 0;
  for (int t = 0; t < new_tokens; ++t) {
    if (llama_decode(ctx, batch) != 0) {
      std::fprintf(stderr, "%s: llama_decode failed at new token %d\n", argv[0], t);
      return 1;
    }
    const float* logits = llama_get_logits_ith(ctx, -1);
    next = 0;  // argmax; the lower id wins a tie, as in Origami's greedy sampling
    for (int v = 1; v < vocab; ++v)
      if (logits[v] > logits[next]) next = v;
    std::printf(t == 0 ? "%d" : " %d", next);
    batch = llama_batch_get_one(&next, 1);
  }
  std::printf("\n");
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
