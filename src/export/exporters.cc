// The registry of export formats (include/trainscope/export.h): one line per format.
#include "trainscope/export.h"

namespace trainscope {

const std::vector<const Exporter*>& Exporters() {
  static const std::vector<const Exporter*> all = {&TensorBoardExporter(), &ChromeTraceExporter(),
                                                   &CsvExporter()};
  return all;
}

const Exporter* FindExporter(const std::string& name) {
  for (const Exporter* e : Exporters()) {
    if (name == e->name()) return e;
  }
  return nullptr;
}

}  // namespace trainscope
