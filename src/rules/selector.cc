// TensorSelector: collection and/or regex selection of tensor names, with a per-name cache.
#include "trainscope/rules.h"

namespace trainscope {

Result<TensorSelector> TensorSelector::Make(std::vector<std::string> collections, std::string regex,
                                            std::string label) {
  TensorSelector s;
  for (auto& c : collections) {
    if (!c.empty()) s.collections_.push_back(std::move(c));
  }
  s.regex_text_ = std::move(regex);
  s.label_ = std::move(label);
  if (!s.regex_text_.empty()) {
    try {
      s.regex_ = std::make_shared<std::regex>(s.regex_text_, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return Status::InvalidArgument("invalid regex '" + s.regex_text_ + "': " + e.what());
    }
  }
  return s;
}

bool TensorSelector::Matches(const std::string& name) const {
  auto it = cache_.find(name);
  if (it != cache_.end()) return it->second;
  bool m = false;
  std::string_view coll(name);
  coll = coll.substr(0, coll.find('/'));
  for (const auto& c : collections_) m = m || coll == c;
  if (!m && regex_) m = std::regex_search(name, *regex_);
  if (cache_.size() > 100000) cache_.clear();  // bounded; names are normally few
  cache_.emplace(name, m);
  return m;
}

std::string TensorSelector::Describe() const {
  std::string out;
  if (!collections_.empty()) {
    out = collections_.size() == 1 ? "collection " : "collections ";
    for (size_t i = 0; i < collections_.size(); ++i) {
      out += (i ? ", '" : "'") + collections_[i] + "'";
    }
  }
  if (!regex_text_.empty()) out += (out.empty() ? "regex '" : " or regex '") + regex_text_ + "'";
  if (!label_.empty()) out = label_ + " (" + out + ")";
  return out;
}

std::vector<std::string> TensorSelector::Hints() const {
  std::vector<std::string> out = collections_;
  // Split the regex at '|' and strip the usual metacharacters to get literal words.
  std::string cur;
  for (char c : regex_text_ + "|") {
    if (c == '|') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (std::string_view(".*+?^$()[]{}\\").find(c) == std::string_view::npos) {
      cur += c;
    }
  }
  return out;
}

}  // namespace trainscope
