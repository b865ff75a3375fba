// trainscope/collections.h — the collections a front end records: the built-in catalogue
// (what each built-in collection selects), the default collections, and a collection's
// configuration. Defined once here for the C++ Session and the Python hook (whose
// trainscope.collection module reads the catalogue and the defaults through _core).
//
// Biases: the default collections are losses, scalars, weights and gradients. "weights" holds
// the parameters not named bias*; "biases" holds those named bias* and is recorded only when
// asked for (a bias's summary rarely tells more than its layer's weights, and it doubles the
// records of small layers). The Python hook always recorded it that way; the C++ Session's
// defaults also had "biases" until the two front ends shared this list.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainscope/schedule.h"

namespace trainscope {

// What a built-in collection selects. `source` is one of "loss", "scalar", "param"
// (weights/biases values), "grad", "output" (a layer's output), "input" (a layer's input);
// `module_types` restricts activation collections to layers of those type names (empty: any).
struct BuiltinCollection {
  std::string_view name;
  std::string_view source;
  std::vector<std::string_view> module_types;
};

// The catalogue, in the order the documentation and error messages list it.
const std::vector<BuiltinCollection>& BuiltinCollections();
// nullptr when `name` is not built in.
const BuiltinCollection* FindBuiltinCollection(std::string_view name);
// losses, scalars, weights, gradients.
const std::vector<std::string_view>& DefaultCollectionNames();
// A collection's save interval when its configuration gives none: 1 for losses and scalars
// (every step), else the front end's save_interval.
int64_t DefaultSaveInterval(std::string_view collection, int64_t save_interval);

struct CollectionConfig {
  std::string name;           // "gradients", "weights", "losses", ... or a custom name
  std::string include_regex;  // optional extra selection (ECMAScript, searched in the name)
  SaveConfig save;
  bool reductions = true;     // save TensorStats summaries
  bool raw = false;           // save the raw tensor too
  int histogram_buckets = 0;  // add a histogram to summaries (0: none)
};

// DefaultCollectionNames() with their default schedules.
std::vector<CollectionConfig> DefaultCollections(int64_t save_interval);

}  // namespace trainscope
