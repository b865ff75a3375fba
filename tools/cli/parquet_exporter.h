// `trainscope export parquet RUN... DEST` (docs/export.md, "Parquet"): an Exporter that runs
// the Python module trainscope.parquet_export, because Parquet is written with pyarrow (Arrow's
// C++ library is not something the CLI links). The interpreter is the installation's own
// (PythonForExport below), so the module it imports is the trainscope of the same install.
#pragma once

#include <string>
#include <vector>

#include "trainscope/export.h"

namespace trainscope::cli {

const Exporter& ParquetExporter();

// The Python the export runs, in this order: $TRAINSCOPE_PYTHON; `python3` beside the command
// as it was started (a venv's bin/trainscope, also when that is a link into a build folder);
// `python3` beside the command's resolved file (a wheel installs it into the venv's bin/);
// else "python3", looked up in PATH.
std::string PythonForExport();

}  // namespace trainscope::cli
