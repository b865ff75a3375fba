// The Python RunReader object (reader_py.cc binds its record-wise methods, columns_py.cc its
// column-wise ones).
#pragma once

#include <memory>

#include "trainscope/reader.h"

namespace trainscope::pyb {

struct PyReader {
  std::unique_ptr<RunReader> reader;
};

}  // namespace trainscope::pyb
