// YAML rule configurations: the same document as the JSON form (docs/rules.md), read with
// yaml-cpp and converted to JSON so both forms share one parser and its error messages.
#pragma once

#include <string>

#include "trainscope/status.h"

namespace trainscope::rules {

// True when this build reads YAML (built with yaml-cpp).
bool HaveYaml();
// The JSON text of a YAML document: plain scalars become numbers, booleans and null where
// YAML 1.2's core schema says so (true/false, ~/null, integers, floats, .inf, .nan); quoted
// scalars stay strings. Errors name the line and column.
Result<std::string> YamlToJson(const std::string& yaml);

}  // namespace trainscope::rules
