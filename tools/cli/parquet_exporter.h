// `trainscope export parquet RUN... DEST` (docs/export.md, "Parquet"): an Exporter that runs
// the Python module trainscope.parquet_export, because Parquet is written with pyarrow (Arrow's
// C++ library is not something the CLI links). The interpreter is the installation's own
// (PythonForExport below), so the module it imports is the trainscope of the same install.
#pragma once

#include <string>
#include <vector>

#include "trainscope/export.h"

namespace trainscope::cli {

// A format whose OUT gathers many runs (`trainscope export FORMAT RUN... OUT`): Parquet's
// partitioned folder. Export() of one run is ExportRuns() of it.
class ManyRunsExporter : public Exporter {
 public:
  virtual Result<std::vector<std::string>> ExportRuns(const std::vector<std::string>& run_dirs,
                                                      const std::string& out,
                                                      const ExportOptions& options) const = 0;
  Result<std::vector<std::string>> Export(const std::string& run_dir, const std::string& out,
                                          const ExportOptions& options) const override {
    return ExportRuns({run_dir}, out, options);
  }
};

const ManyRunsExporter& ParquetExporter();

// The Python the export runs, in this order: $TRAINSCOPE_PYTHON; `python3` beside the command
// as it was started (a venv's bin/trainscope, also when that is a link into a build folder);
// `python3` beside the command's resolved file (a wheel installs it into the venv's bin/);
// else "python3", looked up in PATH.
std::string PythonForExport();

}  // namespace trainscope::cli
