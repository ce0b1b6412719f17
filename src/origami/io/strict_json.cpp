#include "origami/io/strict_json.h"

#include <set>
#include <vector>

namespace origami::io {

nlohmann::json parse_json_refusing_duplicates(
    const std::string& text, const std::function<void(const std::string& key)>& on_duplicate) {
  using json = nlohmann::json;
  std::vector<std::set<std::string>> open;  // the keys of every object being read
  const json::parser_callback_t check = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) open.emplace_back();
    if (event == json::parse_event_t::object_end && !open.empty()) open.pop_back();
    if (event == json::parse_event_t::key && !open.empty() &&
        !open.back().insert(parsed.get<std::string>()).second)
      on_duplicate(parsed.get<std::string>());
    return true;
  };
  return json::parse(text, check);
}

}  // namespace origami::io
