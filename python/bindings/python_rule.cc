// The trampoline for Python custom rules: a C++ Rule that calls the rule's adapter with the GIL
// held and reports what it returned to the engine (after giving the GIL back).
#include "python_rule.h"

#include <map>
#include <optional>
#include <set>

#include "util/logging.h"

namespace trainscope::pyb {
namespace {

bool InterpreterGone() {
#if PY_VERSION_HEX >= 0x030D0000
  return !Py_IsInitialized() || Py_IsFinalizing();
#else
  return !Py_IsInitialized() || _Py_IsFinalizing();
#endif
}

// One call's outcome, taken out of Python before the engine hears of it.
struct Outcome {
  enum Kind { kSkip, kEvaluated, kError } kind = kSkip;
  Evaluation eval;
  std::string error;
};

class PythonRule : public Rule {
 public:
  PythonRule(PythonRules* set, const PythonRules::Entry* entry) : set_(set), entry_(entry) {}

  // A stream's step is complete (its StepRecord, a later step, idle, or the run's end): the
  // rule evaluates it once. A step with a StepRecord but nothing saved is evaluated too (the
  // reader's run.steps() lists it), as it was before custom rules ran in the engine.
  void OnStepData(const StepData& d, RuleContext& ctx) override {
    Evaluate(d.stream, d.step, d.mode, ctx);
  }
  void OnStep(const std::string& stream, const StepRecord& r, RuleContext& ctx) override {
    Evaluate(stream, r.step, r.mode, ctx);
  }

 private:
  void Evaluate(const std::string& stream, int64_t step, Mode mode, RuleContext& ctx) {
    if (disabled_) return;
    auto [it, fresh] = done_.emplace(stream, step);
    if (!fresh) {
      if (step <= it->second) return;
      it->second = step;
    }
    if (InterpreterGone()) return;
    Outcome out = Call(stream, step, mode);
    switch (out.kind) {
      case Outcome::kSkip:
        return;
      case Outcome::kEvaluated:
        ctx.Report(out.eval);
        return;
      case Outcome::kError:
        disabled_ = true;
        set_->CountError();
        LogOnce("custom-rule-" + entry_->id, LogLevel::kWarning,
                "custom rule " + entry_->id + " raised at step " + std::to_string(step) +
                    " (status Error, rule disabled): " + out.error);
        ctx.Error(out.error);
        return;
    }
  }

  Outcome Call(const std::string& stream, int64_t step, Mode mode) {
    Outcome out;
    py::gil_scoped_acquire gil;
    try {
      py::object result = py::reinterpret_borrow<py::object>(entry_->call)(stream, step);
      if (result.is_none()) return out;
      if (py::isinstance<py::str>(result)) {  // the adapter caught the rule's exception
        out.kind = Outcome::kError;
        out.error = result.cast<std::string>();
        return out;
      }
      auto t = result.cast<py::tuple>();
      if (t.size() != 5) throw py::value_error("custom rule adapter: expected a 5-tuple");
      Evaluation& e = out.eval;
      e.worker = stream;
      e.step = step;
      e.mode = mode;
      e.violated = t[0].cast<bool>();
      e.message = t[1].cast<std::string>();
      e.value = t[2].cast<double>();
      e.threshold = t[3].cast<double>();
      e.tensors = t[4].cast<std::vector<std::string>>();
      out.kind = Outcome::kEvaluated;
    } catch (py::error_already_set& err) {
      out.kind = Outcome::kError;
      out.error = err.what();
    } catch (const std::exception& ex) {
      out.kind = Outcome::kError;
      out.error = ex.what();
    }
    return out;
  }

  PythonRules* set_;
  const PythonRules::Entry* entry_;
  bool disabled_ = false;
  std::map<std::string, int64_t> done_;  // stream -> newest step evaluated
};

std::string Text(const py::dict& d, const char* key) {
  if (!d.contains(key) || d[key].is_none()) return "";
  return py::str(d[key]).cast<std::string>();
}

}  // namespace

PythonRules::PythonRules(const py::list& specs) {
  for (const auto& item : specs) {
    auto d = item.cast<py::dict>();
    Entry e;
    e.type = Text(d, "name");
    e.id = Text(d, "id");
    if (e.type.empty() || e.id.empty() || !d.contains("call") ||
        !PyCallable_Check(d["call"].ptr())) {
      throw py::value_error("custom rule spec needs a name, an id and a callable 'call'");
    }
    std::string title = Text(d, "title"), severity = Text(d, "severity"),
                advice = Text(d, "advice");
    if (!title.empty() || !severity.empty() || !advice.empty()) {
      e.advice.title = title;
      if (!severity.empty()) {
        auto s = ParseSeverity(severity);
        if (!s) {
          throw py::value_error("custom rule " + e.id + ": severity '" + severity +
                                "' is not one of critical, warning, info");
        }
        e.advice.severity = *s;
      }
      e.advice.stop_worthy = !d.contains("stop_worthy") || d["stop_worthy"].is_none() ||
                             d["stop_worthy"].cast<bool>();
      e.advice.advise = [advice](const RuleEventRecord&, const Measurements&) { return advice; };
      e.advice.in_events = true;
    }
    e.call = d["call"].ptr();
    Py_INCREF(e.call);
    entries_.push_back(std::move(e));
  }
}

PythonRules::~PythonRules() {
  for (auto& e : entries_) Py_XDECREF(e.call);
}

const PythonRules::Entry* PythonRules::Find(const std::string& id) const {
  for (const auto& e : entries_) {
    if (e.id == id) return &e;
  }
  return nullptr;
}

Status PythonRules::AddTypes(RuleRegistry* registry) {
  std::set<std::string> added;
  for (const auto& e : entries_) {
    if (added.count(e.type)) continue;  // another instance of the same rule class
    if (registry->Find(e.type)) {
      return Status::InvalidArgument("custom rule " + e.id + ": its name '" + e.type +
                                     "' is a built-in rule's; give it another name");
    }
    added.insert(e.type);
    RuleType t;
    t.name = e.type;
    t.summary = "custom Python rule (" + e.type + ".invoke_at_step)";
    t.params = {ParamSpec{"instance", ParamType::kString, "", true,
                          "the id of the rule object (set by trainscope)"}};
    t.requirements = [](const RuleParams&) { return RuleRequirements(); };
    t.create = [this](const RuleParams& p) -> Result<std::unique_ptr<Rule>> {
      const Entry* entry = Find(p.Str("instance"));
      if (!entry) {
        return Status::InvalidArgument("no custom rule object '" + p.Str("instance") + "'");
      }
      return std::unique_ptr<Rule>(new PythonRule(this, entry));
    };
    t.advice = e.advice;
    TS_RETURN_IF_ERROR(registry->Add(std::move(t)));
  }
  return Status::OK();
}

}  // namespace trainscope::pyb
