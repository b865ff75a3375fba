// Save schedules and the collection catalogue (trainscope/schedule.h, collections.h): the
// Python Collection keeps its argument checks and translates to a SaveSchedule, so the
// next-save computation the step clock caches comes from the core, as in the C++ Session.
#include "py_common.h"
#include "trainscope/collections.h"
#include "trainscope/schedule.h"

namespace trainscope::pyb {

void InitSchedule(py::module_& m) {
  m.attr("NEVER_SAVES") = py::int_(kNeverSaves);
  py::class_<SaveConfig>(m, "SaveSchedule", "When a collection saves (trainscope/schedule.h).")
      .def(py::init([](int64_t save_interval, std::vector<int64_t> save_steps,
                       int64_t start_step, int64_t end_step, std::vector<int> modes) {
             SaveConfig c;
             c.save_interval = save_interval;
             c.save_steps = std::move(save_steps);
             c.start_step = start_step;
             c.end_step = end_step;
             for (int mode : modes) c.modes.push_back(ToMode(mode));
             Status s = c.Validate("SaveSchedule");
             if (!s.ok()) ThrowStatus(s);
             return c;
           }),
           py::arg("save_interval"), py::arg("save_steps") = std::vector<int64_t>{},
           py::arg("start_step") = 0, py::arg("end_step") = -1,
           py::arg("modes") = std::vector<int>{})
      .def(
          "should_save",
          [](const SaveConfig& c, int mode, int64_t step) {
            return c.ShouldSave(step, ToMode(mode));
          },
          py::arg("mode"), py::arg("step"))
      .def(
          "next_save",
          [](const SaveConfig& c, int mode, int64_t step) {
            return c.NextSave(step, ToMode(mode));
          },
          py::arg("mode"), py::arg("step"), "Smallest step >= step that saves; NEVER_SAVES if none.");
  m.def("builtin_collections", [] {
    py::list out;
    for (const auto& c : BuiltinCollections()) {
      py::object types = py::none();
      if (!c.module_types.empty()) {
        py::list t;
        for (std::string_view n : c.module_types) t.append(py::str(n.data(), n.size()));
        types = py::tuple(t);
      }
      out.append(py::make_tuple(py::str(c.name.data(), c.name.size()),
                                py::str(c.source.data(), c.source.size()), types));
    }
    return out;
  }, "[(name, source, module type names or None)] of the built-in collections, in order.");
  m.def("default_collections", [] {
    py::list out;
    for (std::string_view n : DefaultCollectionNames()) out.append(py::str(n.data(), n.size()));
    return py::tuple(out);
  });
  m.def(
      "default_save_interval",
      [](const std::string& name, int64_t save_interval) {
        return DefaultSaveInterval(name, save_interval);
      },
      py::arg("collection"), py::arg("save_interval"));
}

}  // namespace trainscope::pyb
