// Save schedules and the collection catalogue (trainscope/schedule.h, collections.h): the
// Python Collection keeps its argument checks and translates to a SaveSchedule, so the
// next-save computation the step clock caches comes from the core, as in the C++ Session.
#include <algorithm>

#include "py_common.h"
#include "trainscope/collections.h"
#include "trainscope/schedule.h"

namespace trainscope::pyb {

namespace {

// The schedules of a hook's tensor collections, asked together: which of them save at a mode
// step (a bit mask by position) and the first step at which any does. One call instead of one
// per collection on each save step (Hook._active_collections, _compute_next_save).
struct ScheduleSet {
  static constexpr size_t kMax = 62;
  std::vector<SaveConfig> schedules;
};

}  // namespace

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
  py::class_<ScheduleSet>(m, "ScheduleSet",
                          "The save schedules of several collections, asked in one call.")
      .def(py::init([](std::vector<SaveConfig> schedules) {
             if (schedules.size() > ScheduleSet::kMax)
               throw py::value_error("ScheduleSet: at most 62 schedules");
             return ScheduleSet{std::move(schedules)};
           }),
           py::arg("schedules"))
      .def("__len__", [](const ScheduleSet& s) { return s.schedules.size(); })
      .def(
          "active",
          [](const ScheduleSet& s, int mode, int64_t step) {
            const Mode m = ToMode(mode);
            uint64_t mask = 0;
            for (size_t i = 0; i < s.schedules.size(); ++i)
              if (s.schedules[i].ShouldSave(step, m)) mask |= uint64_t{1} << i;
            return mask;
          },
          py::arg("mode"), py::arg("step"),
          "Bit i set: schedule i saves at this mode step.")
      .def(
          "next_save",
          [](const ScheduleSet& s, int mode, int64_t step) {
            const Mode m = ToMode(mode);
            int64_t next = kNeverSaves;
            for (const SaveConfig& c : s.schedules) next = std::min(next, c.NextSave(step, m));
            return next;
          },
          py::arg("mode"), py::arg("step"),
          "Smallest step >= step at which any schedule saves; NEVER_SAVES if none.")
      .def(
          "run_end",
          [](const ScheduleSet& s, int mode, int64_t step, int64_t limit) {
            const Mode m = ToMode(mode);
            auto mask = [&](int64_t at) {
              uint64_t out = 0;
              for (size_t i = 0; i < s.schedules.size(); ++i)
                if (s.schedules[i].ShouldSave(at, m)) out |= uint64_t{1} << i;
              return out;
            };
            const uint64_t first = mask(step);
            const int64_t last = step + std::max<int64_t>(limit, 1);
            for (int64_t at = step + 1; at < last; ++at)
              if (mask(at) != first) return at;
            return last;
          },
          py::arg("mode"), py::arg("step"), py::arg("limit"),
          "The first step after `step` (at most step + limit) at which a different set of "
          "schedules saves: the steps in between save exactly as `step` does.");
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
